package textencoder_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/all"
	"github.com/eas-server/eas-server/tensor"
)

// texts are the test's inputs: lengths from the special tokens alone to
// past the tiny models' max_length, accents, CJK, unknown words.
var texts = []string{
	"hello world",
	"",
	"The movie was great! Really, really great fun; the day was good.",
	"Café déjà vu 我爱北京 🙂 zzz",
	strings.Repeat("good bad movie ", 30),
	"x",
}

// minilmDir is where scripts/fetch-tokenizers.sh puts all-MiniLM-L6-v2's
// sentence-transformers directory.
func minilmDir() string {
	return filepath.Join(require.TokenizerCache(), "all-minilm-l6-v2")
}

var (
	genOnce sync.Once
	genDir  string
	genRef  map[string][][]float32
	genErr  error
	genOut  []byte
	haveLM  bool
)

// models has PyTorch write the models (testdata/gen_models.py write),
// Hugging Face tokenizers tokenize the texts (testdata/tok_ids.py, in the
// tensorflow venv), and PyTorch compute the references from those ids
// (gen_models.py ref): the reference never sees our tokenizer.
func models(t *testing.T) (string, map[string][][]float32, bool) {
	t.Helper()
	genOnce.Do(func() {
		if genDir, genErr = os.MkdirTemp("", "textencoder-test-"); genErr != nil {
			return
		}
		if genOut, genErr = exec.Command("/usr/bin/python3", "testdata/gen_models.py", "write", genDir).CombinedOutput(); genErr != nil {
			return
		}
	})
	if genErr != nil {
		require.Missing(t, require.Python, "testdata/gen_models.py needs Debian's python3-torch on /usr/bin/python3 (scripts/install-test-deps.sh): %v\n%s", genErr, genOut)
	}
	if genRef == nil {
		py := pyvenv.Python(t, "tensorflow")
		specs := map[string]any{}
		for _, m := range []string{"bert", "onnx", "classifier"} {
			specs[m] = map[string]any{"tokenizer": filepath.Join(genDir, m, "tokenizer.json"), "max_length": 64, "texts": texts}
		}
		lm := minilmDir()
		haveLM = fileExists(filepath.Join(lm, "model.safetensors")) && fileExists(filepath.Join(lm, "tokenizer.json"))
		if haveLM {
			// sentence-transformers' max_seq_length (sentence_bert_config.json)
			specs["minilm"] = map[string]any{"tokenizer": filepath.Join(lm, "tokenizer.json"), "max_length": 256, "texts": texts}
		}
		in, _ := json.Marshal(specs)
		cmd := exec.Command(py, "testdata/tok_ids.py")
		cmd.Stdin = bytes.NewReader(in)
		ids, err := cmd.Output()
		if err != nil {
			t.Fatalf("tok_ids.py: %v", err)
		}
		if err := os.WriteFile(filepath.Join(genDir, "ids.json"), ids, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("/usr/bin/python3", "testdata/gen_models.py", "ref", genDir, lm).CombinedOutput(); err != nil {
			t.Fatalf("gen_models.py ref: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(genDir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &genRef); err != nil {
			t.Fatal(err)
		}
	}
	return genDir, genRef, haveLM
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestMain(m *testing.M) {
	code := m.Run()
	if genDir != "" {
		os.RemoveAll(genDir)
	}
	os.Exit(code)
}

func svc(name, path, mc string) string {
	if mc == "" {
		mc = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"processor":"text_encoder","model_path":%q,"token":"T","model_config":%s,
		"metadata":{"instance":1,"cpu":2,"rpc":{"batching":true,"max_batch_size":16,"max_batch_timeout":30,"worker_threads":1}}}`, name, path, mc)
}

// TestAgainstTorch serves each model from raw text and compares every
// answer with PyTorch's: the random BERT as a Hugging Face directory and
// as torch.onnx.export's file (mean pooling + normalize from model_config),
// the classifier's softmax with its id2label, and all-MiniLM-L6-v2's real
// weights with the pooling and normalization its sentence-transformers
// files name. Each text alone ({"text"}), all in one request ({"texts"},
// one run padded to the longest), OpenAI's form ({"input"}), and all
// concurrently (the scheduler batches them).
func TestAgainstTorch(t *testing.T) {
	dir, ref, lm := models(t)
	services := []string{
		svc("bert", filepath.Join(dir, "bert"), `{"pooling": "mean", "normalize": true}`),
		svc("onnx", filepath.Join(dir, "onnx", "model.onnx"), `{"pooling": "mean", "normalize": true}`),
		svc("classifier", filepath.Join(dir, "classifier"), `{"top_k": 3}`),
	}
	names := []string{"bert", "onnx", "classifier"}
	if lm {
		services = append(services, svc("minilm", minilmDir(), ""))
		names = append(names, "minilm")
	} else {
		require.Missing(t, require.Python, "no all-MiniLM-L6-v2 in %s: run bash scripts/fetch-tokenizers.sh; the other models are still checked", minilmDir())
	}
	st := teststack.New(t, teststack.Options{}, services...)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			url := st.URL + "/api/predict/" + name
			want := ref[name]
			post := func(body string) []byte {
				code, got, _ := teststack.Do(t, http.MethodPost, url, "T", []byte(body))
				if code != http.StatusOK {
					t.Fatalf("%.80s: %d %s", body, code, got)
				}
				return got
			}
			for i, s := range texts {
				b, _ := json.Marshal(map[string]string{"text": s})
				check(t, name, fmt.Sprintf("text %d alone", i), post(string(b)), want[i])
			}
			b, _ := json.Marshal(map[string][]string{"texts": texts})
			var list []json.RawMessage
			if err := json.Unmarshal(post(string(b)), &list); err != nil || len(list) != len(texts) {
				t.Fatalf("texts: %v, %d answers", err, len(list))
			}
			for i := range texts {
				check(t, name, fmt.Sprintf("text %d in a list", i), list[i], want[i])
			}
			if name != "classifier" {
				b, _ := json.Marshal(map[string]any{"input": texts, "model": "m"})
				var oa struct {
					Object string
					Data   []struct {
						Object    string
						Index     int
						Embedding []float32
					}
					Usage struct {
						PromptTokens int `json:"prompt_tokens"`
					}
				}
				if err := json.Unmarshal(post(string(b)), &oa); err != nil || oa.Object != "list" || len(oa.Data) != len(texts) || oa.Usage.PromptTokens == 0 {
					t.Fatalf("input: %v %+v", err, oa)
				}
				for i, d := range oa.Data {
					if d.Index != i || d.Object != "embedding" {
						t.Errorf("input: data[%d] is %+v", i, d)
					}
					if err := tensor.CloseValues(fmt.Sprintf("%s input %d", name, i), d.Embedding, want[i], tensor.F32Reformulated); err != nil {
						t.Error(err)
					}
				}
			}
			var wg sync.WaitGroup
			for round := 0; round < 3; round++ {
				for i, s := range texts {
					wg.Go(func() {
						b, _ := json.Marshal(map[string]string{"text": s})
						code, got, _ := teststack.Do(t, http.MethodPost, url, "T", b)
						if code != http.StatusOK {
							t.Errorf("concurrent %d: %d %s", i, code, got)
							return
						}
						check(t, name, fmt.Sprintf("concurrent text %d", i), got, want[i])
					})
				}
			}
			wg.Wait()
		})
	}
}

// labels are gen_models.py's classifier's.
var labels = []string{"negative", "neutral", "positive"}

// check compares one answer with the reference: an embedding, or (the
// classifier, top_k 3) every label's score.
func check(t *testing.T, model, what string, got []byte, want []float32) {
	t.Helper()
	if model == "classifier" {
		var ls []struct {
			Label string
			Score float32
		}
		if err := json.Unmarshal(got, &ls); err != nil || len(ls) != 3 {
			t.Errorf("%s %s: %s: %v", model, what, got, err)
			return
		}
		scores := make([]float32, 3)
		for i, l := range ls {
			k := -1
			for j, n := range labels {
				if n == l.Label {
					k = j
				}
			}
			if k < 0 || i > 0 && l.Score > ls[i-1].Score {
				t.Errorf("%s %s: %s: unknown label or not sorted", model, what, got)
				return
			}
			scores[k] = l.Score
		}
		if err := tensor.CloseValues(model+" "+what, scores, want, tensor.F32Reformulated); err != nil {
			t.Error(err)
		}
		return
	}
	var e struct{ Embedding []float32 }
	if err := json.Unmarshal(got, &e); err != nil || len(e.Embedding) != len(want) {
		t.Errorf("%s %s: %.200s: %v (want %d values)", model, what, got, err, len(want))
		return
	}
	if err := tensor.CloseValues(model+" "+what, e.Embedding, want, tensor.F32Reformulated); err != nil {
		t.Error(err)
	}
}
