package processors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/tensor"
)

type nop struct{}

func (nop) Configure(Spec) error                                   { return nil }
func (nop) Load(context.Context, Files) error                      { return nil }
func (nop) Metadata() Metadata                                     { return Metadata{} }
func (nop) Decode(context.Context, *Request) (int, error)          { return 0, nil }
func (nop) Run(context.Context, []int) ([]string, error)           { return nil, nil }
func (nop) Encode(context.Context, int, string) (*Response, error) { return nil, nil }

func newNop() *Engine { return Adapt[int, string](nop{}) }

// registrations makes each run's test codes unique: the registry is global
// and lives as long as the test binary (go test -count=N runs tests again).
var registrations atomic.Int32

func TestRegistry(t *testing.T) {
	code := fmt.Sprintf("test_nop_%d", registrations.Add(1))
	Register(code, "a test processor", newNop)
	if _, err := New(code); err != nil {
		t.Fatal(err)
	}
	if _, err := New("no_such"); err == nil || !strings.Contains(err.Error(), "known: ") || !strings.Contains(err.Error(), code) {
		t.Fatalf("unknown code: err = %v, want the list of known codes", err)
	}
	for _, bad := range []func(){
		func() { Register("", "x", newNop) },
		func() { Register(code+"_nil", "x", nil) },
		func() { Register(code, "again", newNop) },
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
	mf := ModelFile{Kind: "PMML", Exts: []string{".pmml", ".xml"}}
	if _, err := mf.Find(dir, ""); err == nil || !strings.Contains(err.Error(), "no PMML file") {
		t.Fatalf("empty dir: %v", err)
	}
	write("sub/model.PMML")
	write("notes.txt")
	if got, err := mf.Find(dir, ""); err != nil || got != filepath.Join(dir, "sub/model.PMML") {
		t.Fatalf("one model: %q, %v", got, err)
	}
	write("other.xml")
	if _, err := mf.Find(dir, ""); err == nil || !strings.Contains(err.Error(), "set model_entry") {
		t.Fatalf("two models: %v", err)
	}
	if got, err := mf.Find(dir, "other.xml"); err != nil || got != filepath.Join(dir, "other.xml") {
		t.Fatalf("model_entry: %q, %v", got, err)
	}
	if _, err := mf.Find(dir, "../../etc/passwd"); err == nil {
		t.Fatal("model_entry escaped the model directory")
	}
	if got, err := mf.Find(filepath.Join(dir, "notes.txt"), ""); err != nil || got != filepath.Join(dir, "notes.txt") {
		t.Fatalf("a file model_path is used as is: %q, %v", got, err)
	}
}

func TestEngineRunsTypedPayloads(t *testing.T) {
	e := Adapt[*TensorPayload, int](counter{})
	p, err := e.Decode(t.Context(), &Request{Body: []byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Run(context.Background(), []any{p, p})
	if err != nil || len(out) != 2 || out[0].(int) != 3 {
		t.Fatalf("run: %v %v", out, err)
	}
	if e.BatchKey() != nil || e.ServesTensors() {
		t.Fatal("counter implements neither Batcher nor Tensors")
	}
	if _, err := Adapt[int, string](short{}).Run(context.Background(), []any{1, 2}); err == nil || !strings.Contains(err.Error(), "1 results for a batch of 2") {
		t.Fatalf("a processor that drops results must fail the batch: %v", err)
	}
}

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		N int `json:"n"`
	}
	for _, tc := range []struct {
		raw, err string
		n        int
	}{
		{"", "", 7}, {"  ", "", 7}, {"null", "", 7}, {`{"n": 3}`, "", 3},
		{`{"m": 3}`, `unknown field "m"`, 0}, {`{"n": "x"}`, "cannot unmarshal", 0},
		{`{"n": 3} {}`, "trailing data", 0}, {`{"n": 3} x`, "trailing data", 0},
	} {
		c := cfg{N: 7}
		err := Spec{Code: "echo", ModelConfig: []byte(tc.raw)}.DecodeConfig(&c, `{"n": N}`)
		switch {
		case tc.err == "" && (err != nil || c.N != tc.n):
			t.Errorf("%q: %+v, %v", tc.raw, c, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `echo accepts {"n": N}`)):
			t.Errorf("%q: err %v, want %q and what echo accepts", tc.raw, err, tc.err)
		}
	}
}

type counter struct{ nop }

func (counter) Decode(_ context.Context, r *Request) (*TensorPayload, error) {
	return &TensorPayload{Outputs: []string{string(r.Body)}}, nil
}
func (counter) Run(_ context.Context, b []*TensorPayload) ([]int, error) {
	out := make([]int, len(b))
	for i, p := range b {
		out[i] = len(p.Outputs[0])
	}
	return out, nil
}
func (counter) Encode(context.Context, *TensorPayload, int) (*Response, error) { return nil, nil }

type short struct{ nop }

func (short) Run(context.Context, []int) ([]string, error) { return []string{"one"}, nil }

// halver fails its odd payloads alone and doubles the even ones.
type halver struct{ nop }

func (halver) Run(_ context.Context, b []int) ([]string, error) {
	out := make([]string, len(b))
	errs := make(PayloadErrors, len(b))
	for i, v := range b {
		if v%2 == 1 {
			errs[i] = badinput.Errorf("%d is odd", v)
			continue
		}
		out[i] = fmt.Sprint(2 * v)
	}
	return out, errs.Err()
}

// TestPayloadErrorsFailOnlyTheirPayloads: the scheduler's Failed for a
// payload Run failed alone, the results for the others; a batch of one
// fails as a whole.
func TestPayloadErrorsFailOnlyTheirPayloads(t *testing.T) {
	e := Adapt[int, string](halver{})
	out, err := e.Run(context.Background(), []any{2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{"4", "3 is odd", "8", "5 is odd"} {
		switch r := out[i].(type) {
		case scheduler.Failed:
			if !badinput.Is(r.Err) || r.Err.Error() != want {
				t.Errorf("payload %d failed with %v, want %q", i, r.Err, want)
			}
		default:
			if r != want {
				t.Errorf("payload %d: %v, want %v", i, r, want)
			}
		}
	}
	if _, err := e.Run(context.Background(), []any{7}); !badinput.Is(err) || err.Error() != "7 is odd" {
		t.Errorf("a batch of one: err = %v, want its payload's own error", err)
	}
	if out, err := e.Run(context.Background(), []any{2, 4}); err != nil || out[1] != "8" {
		t.Errorf("no failure: %v, %v", out, err)
	}
	errs := PayloadErrors{nil, errors.New("a"), errors.New("b")}
	if got := errs.Error(); got != "2 of 3 payloads failed; the first: a" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(errs, errs[2]) {
		t.Error("errors.Is does not see a payload's error")
	}
}

// TestEngineWithoutTensors: the tensor calls of an engine that serves none
// answer 501, never dereference nil.
func TestEngineWithoutTensors(t *testing.T) {
	e := newNop()
	if e.ServesTensors() {
		t.Fatal("nop serves tensors")
	}
	if _, err := e.FromTensors(t.Context(), &TensorPayload{}); !errors.Is(err, ErrNoTensors) {
		t.Errorf("FromTensors: %v", err)
	}
	if _, err := e.ToTensors(t.Context(), 1, "r"); !errors.Is(err, ErrNoTensors) {
		t.Errorf("ToTensors: %v", err)
	}
}

// ctxKey marks the context a test hands the Engine.
type ctxKey struct{}

// ctxSeer records, in its result, the context value each data-path call
// was given.
type ctxSeer struct{ nop }

func seen(ctx context.Context) string { s, _ := ctx.Value(ctxKey{}).(string); return s }

func (ctxSeer) Decode(ctx context.Context, _ *Request) (*TensorPayload, error) {
	return &TensorPayload{Outputs: []string{"decode:" + seen(ctx)}}, nil
}
func (ctxSeer) FromTensors(ctx context.Context, _ *TensorPayload) (*TensorPayload, error) {
	return &TensorPayload{Outputs: []string{"from:" + seen(ctx)}}, nil
}
func (ctxSeer) Run(_ context.Context, b []*TensorPayload) ([]int, error) {
	return make([]int, len(b)), nil
}
func (ctxSeer) Encode(ctx context.Context, p *TensorPayload, _ int) (*Response, error) {
	return &Response{Body: []byte(p.Outputs[0] + " encode:" + seen(ctx))}, nil
}
func (ctxSeer) Platform() string { return "test" }
func (ctxSeer) ToTensors(ctx context.Context, p *TensorPayload, _ int) (*TensorResult, error) {
	return &TensorResult{Outputs: []tensor.Tensor{{Name: p.Outputs[0] + " to:" + seen(ctx)}}}, nil
}

// TestEnginePassesContext: the Engine hands each call the context it is
// given, so a processor never needs one of its own.
func TestEnginePassesContext(t *testing.T) {
	e := Adapt[*TensorPayload, int](ctxSeer{})
	ctx := context.WithValue(t.Context(), ctxKey{}, "req")
	p, err := e.Decode(ctx, &Request{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.Encode(ctx, p, 0)
	if err != nil || string(resp.Body) != "decode:req encode:req" {
		t.Errorf("Decode, Encode: %q, %v", resp.Body, err)
	}
	p, err = e.FromTensors(ctx, &TensorPayload{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.ToTensors(ctx, p, 0)
	if err != nil || tr.Outputs[0].Name != "from:req to:req" {
		t.Errorf("FromTensors, ToTensors: %+v, %v", tr, err)
	}
}
