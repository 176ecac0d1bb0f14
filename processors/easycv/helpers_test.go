package easycv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/processors"
)

// The models, images and references come from testdata/gen_models.py, run
// once per test binary with Debian's python3-torch into a temporary
// directory. The tests skip only when /usr/bin/python3 has no torch.
var (
	genOnce sync.Once
	genDir  string
	genErr  error
	genSkip string
)

func generated(t testing.TB) string {
	t.Helper()
	genOnce.Do(func() {
		if out, err := exec.Command("/usr/bin/python3", "-c", "import torch, torchvision, PIL").CombinedOutput(); err != nil {
			genSkip = fmt.Sprintf("/usr/bin/python3 cannot import torch, torchvision and PIL (run scripts/install-test-deps.sh): %v\n%s", err, out)
			return
		}
		genDir, genErr = os.MkdirTemp("", "easycv-test-")
		if genErr != nil {
			return
		}
		out, err := exec.Command("/usr/bin/python3", "testdata/gen_models.py", genDir).CombinedOutput()
		if err != nil {
			genErr = fmt.Errorf("testdata/gen_models.py: %v\n%s", err, out)
		}
	})
	if genSkip != "" {
		require.Missing(t, require.Python, "%s", genSkip)
	}
	if genErr != nil {
		t.Fatal(genErr)
	}
	return genDir
}

type refCase struct {
	PreW         int       `json:"pre_w"`
	PreH         int       `json:"pre_h"`
	Pre          string    `json:"pre"`
	TensorSHA256 string    `json:"tensor_sha256"`
	ClsProb      []float64 `json:"cls_prob"`
	LogitsProb   []float64 `json:"logits_prob"`
}

type refs struct {
	Classes  []string `json:"classes"`
	Variants map[string]struct {
		TestPipeline json.RawMessage    `json:"test_pipeline"`
		Images       map[string]refCase `json:"images"`
	} `json:"variants"`
	Resize []struct {
		W      int    `json:"w"`
		H      int    `json:"h"`
		Filter string `json:"filter"`
		Out    string `json:"out"`
	} `json:"resize"`
	ResizeSrc string `json:"resize_src"`
}

var (
	refsOnce sync.Once
	refsVal  refs
)

func loadRefs(t testing.TB) refs {
	t.Helper()
	dir := generated(t)
	refsOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join(dir, "refs.json"))
		if err == nil {
			err = json.Unmarshal(b, &refsVal)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	return refsVal
}

func unb64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// load configures and loads a classifier on model with model_config cfg.
func load(t testing.TB, model, cfg string) *Classifier {
	t.Helper()
	c := New()
	spec := processors.Spec{Service: "t", Code: Code, ModelSource: model, ModelConfig: []byte(cfg), CPU: 2}
	if err := c.Configure(spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), processors.Files{ModelPath: model}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// imageBody is the request {"image": base64(file)}.
func imageBody(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(`{"image":"` + base64.StdEncoding.EncodeToString(b) + `"}`)
}
