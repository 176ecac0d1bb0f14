package processors

import (
	"context"
	"strings"
	"testing"
)

type nop struct{}

func (nop) Configure(Spec) error                      { return nil }
func (nop) Load(context.Context) error                { return nil }
func (nop) Metadata() Metadata                        { return Metadata{} }
func (nop) Decode(*Request) (any, error)              { return nil, nil }
func (nop) Run(context.Context, []any) ([]any, error) { return nil, nil }
func (nop) Encode(any, any) (*Response, error)        { return nil, nil }

func TestRegistry(t *testing.T) {
	Register("test_nop", "a test processor", func() Processor { return nop{} })
	if _, err := New("test_nop"); err != nil {
		t.Fatal(err)
	}
	if _, err := New("no_such"); err == nil || !strings.Contains(err.Error(), "known: ") || !strings.Contains(err.Error(), "test_nop") {
		t.Fatalf("unknown code: err = %v, want the list of known codes", err)
	}
	if _, err := New("caffe_gpu"); err == nil || !strings.Contains(err.Error(), "onnx") {
		t.Fatalf("caffe_gpu: err = %v, want a reason naming what to use instead", err)
	}
	for _, bad := range []func(){
		func() { Register("", "x", func() Processor { return nop{} }) },
		func() { Register("test_nil", "x", nil) },
		func() { Register("test_nop", "again", func() Processor { return nop{} }) },
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
