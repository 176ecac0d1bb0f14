package libtf

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// TestMissingLibrary: an explicit path that holds no library is the only
// candidate, and the error says so (wrapping ErrLibrary).
func TestMissingLibrary(t *testing.T) {
	libMu.Lock()
	loaded := libAPI != nil
	libMu.Unlock()
	bad := filepath.Join(t.TempDir(), "nowhere")
	t.Setenv(EnvLibraryPath, bad)
	cands, explicit := Search().Candidates()
	if !explicit || len(cands) != 1 || cands[0] != bad {
		t.Errorf("candidates %v (explicit %v), want only %s", cands, explicit, bad)
	}
	if loaded {
		t.Skip("the library is already open in this process")
	}
	_, err := Load(t.TempDir(), Options{})
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load without the library: %v, want ErrLibrary naming %s", err, bad)
	}
}

// TestSavedModel loads a Keras SavedModel that TensorFlow writes now and
// compares each signature's outputs with TensorFlow's own in Python: float,
// int, bool and string tensors, fed and fetched by the graph names of the
// SignatureDef. Runs happen from several goroutines at once.
func TestSavedModel(t *testing.T) {
	env := libtftest.Setup(t)
	dir, refs := libtftest.Models(t, env)
	rt, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if rt.Library != env.Library || !strings.HasPrefix(rt.Version, "2.") {
		t.Errorf("runtime %+v, want the library %s, a TensorFlow 2", rt, env.Library)
	}
	for _, model := range []string{"dense", "table"} {
		sm, err := savedmodel.Load(filepath.Join(dir, model))
		if err != nil {
			t.Fatal(err)
		}
		sess, err := Load(sm.Dir, Options{IntraOpThreads: 2, InterOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		for sig, c := range refs[model] {
			def := sm.MetaGraph.SignatureDef[sig]
			var feeds []Feed
			for key, in := range c.Inputs {
				feeds = append(feeds, Feed{Name: def.Inputs[key].GetName(), Value: in})
			}
			keys := make([]string, 0, len(c.Outputs))
			for k := range c.Outputs {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			fetches := make([]string, len(keys))
			for i, k := range keys {
				fetches[i] = def.Outputs[k].GetName()
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					outs, err := sess.Run(feeds, fetches)
					if err != nil {
						t.Errorf("%s %s: %v", model, sig, err)
						return
					}
					for i, k := range keys {
						if err := tensor.Close(outs[i], c.Outputs[k], tensor.F32Accumulated); err != nil {
							t.Errorf("%s %s output %s: %v", model, sig, k, err)
						}
					}
				})
			}
			wg.Wait()
		}
	}
}

// TestRunErrors: TensorFlow's refusals come back as errors, not crashes.
func TestRunErrors(t *testing.T) {
	env := libtftest.Setup(t)
	dir, _ := libtftest.Models(t, env)
	sess, err := Load(filepath.Join(dir, "dense"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	x := tensor.FromFloat32("x", []int64{1, 4}, make([]float32, 4)) // 4 features, the model wants 5
	_, err = sess.Run([]Feed{{Name: "serving_default_x:0", Value: x}}, []string{"StatefulPartitionedCall:0"})
	var re *RunError
	if !errors.As(err, &re) || !re.InvalidArgument() {
		t.Errorf("a [1,4] input for [-1,5]: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := sess.Run(nil, []string{"no_such_op:0"}); err == nil || !strings.Contains(err.Error(), "no_such_op") {
		t.Errorf("an unknown fetch: %v", err)
	}
	if _, err := Load(t.TempDir(), Options{}); err == nil {
		t.Error("loading an empty directory succeeded")
	}
	sess.Close()
	if _, err := sess.Run(nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}
