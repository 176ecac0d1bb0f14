package processors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

type nop struct{}

func (nop) Configure(Spec) error                      { return nil }
func (nop) Load(context.Context) error                { return nil }
func (nop) Metadata() Metadata                        { return Metadata{} }
func (nop) Decode(*Request) (any, error)              { return nil, nil }
func (nop) Run(context.Context, []any) ([]any, error) { return nil, nil }
func (nop) Encode(any, any) (*Response, error)        { return nil, nil }

// registrations makes each run's test codes unique: the registry is global
// and lives as long as the test binary (go test -count=N runs tests again).
var registrations atomic.Int32

func TestRegistry(t *testing.T) {
	code := fmt.Sprintf("test_nop_%d", registrations.Add(1))
	Register(code, "a test processor", func() Processor { return nop{} })
	if _, err := New(code); err != nil {
		t.Fatal(err)
	}
	if _, err := New("no_such"); err == nil || !strings.Contains(err.Error(), "known: ") || !strings.Contains(err.Error(), code) {
		t.Fatalf("unknown code: err = %v, want the list of known codes", err)
	}
	if _, err := New("caffe_gpu"); err == nil || !strings.Contains(err.Error(), "onnx") {
		t.Fatalf("caffe_gpu: err = %v, want a reason naming what to use instead", err)
	}
	for _, bad := range []func(){
		func() { Register("", "x", func() Processor { return nop{} }) },
		func() { Register(code+"_nil", "x", nil) },
		func() { Register(code, "again", func() Processor { return nop{} }) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Register did not panic")
				}
			}()
			bad()
		}()
	}
}

func TestFindModelFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exts := []string{".pmml", ".xml"}
	if _, err := FindModelFile(dir, "", exts, "PMML"); err == nil || !strings.Contains(err.Error(), "no PMML file") {
		t.Fatalf("empty dir: %v", err)
	}
	write("sub/model.PMML")
	write("notes.txt")
	if got, err := FindModelFile(dir, "", exts, "PMML"); err != nil || got != filepath.Join(dir, "sub/model.PMML") {
		t.Fatalf("one model: %q, %v", got, err)
	}
	write("other.xml")
	if _, err := FindModelFile(dir, "", exts, "PMML"); err == nil || !strings.Contains(err.Error(), "set model_entry") {
		t.Fatalf("two models: %v", err)
	}
	if got, err := FindModelFile(dir, "other.xml", exts, "PMML"); err != nil || got != filepath.Join(dir, "other.xml") {
		t.Fatalf("model_entry: %q, %v", got, err)
	}
	if _, err := FindModelFile(dir, "../../etc/passwd", exts, "PMML"); err == nil {
		t.Fatal("model_entry escaped the model directory")
	}
	if got, err := FindModelFile(filepath.Join(dir, "notes.txt"), "", exts, "PMML"); err != nil || got != filepath.Join(dir, "notes.txt") {
		t.Fatalf("a file model_path is used as is: %q, %v", got, err)
	}
}
