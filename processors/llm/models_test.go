package llm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

// The test models are made by scripts/gen-llm-models.py with the llm venv,
// once per version of the script: into
// os.UserCacheDir()/eas-server/llm-models/<sha256 of the script>, so that
// later test runs start at once. Without the venv or the tokenizer files
// the tests skip, and fail under EAS_REQUIRE_PYTHON=1.

var (
	modelsOnce sync.Once
	modelsDir  string
	modelsErr  string // the generator's failure, reported by every test that needs it
)

// testModels returns the directory gen-llm-models.py wrote, making it first
// when this version of the script has not run yet.
func testModels(t testing.TB) string {
	t.Helper()
	root := require.RepoRoot()
	if root == "" {
		t.Fatal("the repository's go.mod is not above the test's directory")
	}
	script := filepath.Join(root, "scripts", "gen-llm-models.py")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no user cache directory for the test models: %v", err)
	}
	base := filepath.Join(cache, "eas-server", "llm-models")
	dir := filepath.Join(base, hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
		return dir
	}
	tokDir := require.TokenizerCache()
	for _, f := range []string{"gpt2/encoder.json", "gpt2/vocab.bpe", "llama3/tokenizer.json", "qwen3/tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(tokDir, f)); err != nil {
			require.Missing(t, require.Python, "no %s in %s: run bash scripts/fetch-tokenizers.sh (make test-deps does)", f, tokDir)
		}
	}
	py := pyvenv.Python(t, "llm")
	modelsOnce.Do(func() {
		if err := os.MkdirAll(base, 0o755); err != nil {
			modelsErr = err.Error()
			return
		}
		tmp, err := os.MkdirTemp(base, "tmp-")
		if err != nil {
			modelsErr = err.Error()
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command(py, script, tmp)
		cmd.Env = append(os.Environ(), "EAS_TOKENIZER_CACHE="+tokDir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			modelsErr = "gen-llm-models.py: " + err.Error() + "\n" + lastLines(out.String(), 30)
			return
		}
		if err := os.WriteFile(filepath.Join(tmp, "done"), nil, 0o644); err != nil {
			modelsErr = err.Error()
			return
		}
		// Another test process may have finished first: its copy is as good.
		if err := os.Rename(tmp, dir); err != nil {
			if _, serr := os.Stat(filepath.Join(dir, "done")); serr != nil {
				modelsErr = err.Error()
				return
			}
		}
		// Earlier versions of the script's models are not used again.
		olds, _ := filepath.Glob(filepath.Join(base, "*"))
		for _, o := range olds {
			if o != dir && !strings.HasPrefix(filepath.Base(o), "tmp-") {
				os.RemoveAll(o)
			}
		}
		modelsDir = dir
	})
	if modelsErr != "" {
		t.Fatal(modelsErr)
	}
	return modelsDir
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// reference is a family's reference.json: transformers' greedy tokens and
// first logits per prompt.
type reference struct {
	Family       string   `json:"family"`
	MaxNewTokens int      `json:"max_new_tokens"`
	Vocab        int      `json:"vocab"`
	Layouts      []string `json:"layouts"`
	Prompts      []struct {
		Text       string    `json:"text"`
		IDs        []int32   `json:"ids"`
		Greedy     []int32   `json:"greedy"`
		Gaps       []float64 `json:"gaps"`
		Logits     string    `json:"logits"`
		LogitSteps int       `json:"logit_steps"`
		logits     [][]float32
	} `json:"prompts"`
}

func loadReference(t testing.TB, famDir string) *reference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(famDir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for i := range ref.Prompts {
		p := &ref.Prompts[i]
		raw, err := os.ReadFile(filepath.Join(famDir, p.Logits))
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != 4*p.LogitSteps*ref.Vocab {
			t.Fatalf("%s: %d bytes, want %d steps of %d float32", p.Logits, len(raw), p.LogitSteps, ref.Vocab)
		}
		for s := 0; s < p.LogitSteps; s++ {
			row := make([]float32, ref.Vocab)
			for j := range row {
				row[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(s*ref.Vocab+j):]))
			}
			p.logits = append(p.logits, row)
		}
	}
	return &ref
}

var (
	sharedMu     sync.Mutex
	sharedModels = map[string]*Model{}
)

// shared opens the model directory dir once per test process: opening
// parses tokenizer.json, which takes seconds under the race detector, and
// tests run one at a time, each releasing its sequences. The models stay
// open until the process ends.
func shared(t testing.TB, dir string) *Model { return sharedWith(t, dir, Options{}) }

// sharedWith is shared with options (one intra-op thread always).
func sharedWith(t testing.TB, dir string, opt Options) *Model {
	t.Helper()
	opt.Threads = 1
	key := fmt.Sprintf("%s %+v", dir, opt)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if m, ok := sharedModels[key]; ok {
		return m
	}
	m, err := Open(t.Context(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	sharedModels[key] = m
	return m
}

// holding is what the sequences still hold: running slots on the slot
// cache (released ones may stay as prefixes), else the blocks' bytes.
func holding(m *Model) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sc != nil {
		return int64(m.sc.live)
	}
	return m.kvBytes
}
