package jinja_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/jinja"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

var chatModels = []string{"llama2", "llama3", "qwen3", "gemma3"}

// needConfigs skips (or fails, under EAS_REQUIRE_PYTHON=1) without the
// fetched tokenizer_config.json files.
func needConfigs(t testing.TB) string {
	t.Helper()
	dir := require.TokenizerCache()
	for _, m := range chatModels {
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			if _, err := os.Stat(filepath.Join(dir, m, f)); err != nil {
				require.Missing(t, require.Python, "no %s/%s in %s: run bash scripts/fetch-tokenizers.sh (make test-deps does)", m, f, dir)
			}
		}
	}
	return dir
}

// runPython runs a testdata script with the llm venv's interpreter.
func runPython(t *testing.T, script string, args ...string) {
	t.Helper()
	py := pyvenv.Python(t, "llm")
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

func readJSON(t *testing.T, path string) *jinja.Map {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jinja.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(*jinja.Map)
	if !ok {
		t.Fatalf("%s: not an object", path)
	}
	return m
}

func get(m *jinja.Map, k string) any {
	v, _ := m.Get(k)
	return v
}

// TestChatParity renders every case of testdata/ref_chat.py with the real
// templates and demands transformers' bytes (or an error where it failed).
func TestChatParity(t *testing.T) {
	dir := needConfigs(t)
	out := filepath.Join(t.TempDir(), "ref_chat.json")
	runPython(t, "ref_chat.py", dir, out)
	ref := readJSON(t, out)

	type model struct {
		templates *jinja.ChatTemplates
		err       error
		special   map[string]any
	}
	models := map[string]*model{}
	refModels := get(ref, "models").(*jinja.Map)
	for _, name := range chatModels {
		b, err := os.ReadFile(filepath.Join(dir, name, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		m := &model{}
		m.templates, m.err = jinja.ParseTokenizerConfigTemplate(b)
		if m.special, err = jinja.SpecialTokens(b); err != nil {
			t.Fatal(err)
		}
		// The special tokens are transformers' special_tokens_map.
		want := get(get(refModels, name).(*jinja.Map), "special_tokens_map").(*jinja.Map)
		if len(m.special) != want.Len() {
			t.Errorf("%s: special tokens %v, want %v", name, m.special, want.Keys())
		}
		for _, k := range want.Keys() {
			if got, ok := m.special[k]; !ok || !sameJSON(got, get(want, k)) {
				t.Errorf("%s: %s = %#v, want %#v", name, k, got, get(want, k))
			}
		}
		models[name] = m
	}
	if !errors.Is(models["llama2"].err, jinja.ErrNoChatTemplate) {
		t.Errorf("llama2: %v, want ErrNoChatTemplate", models["llama2"].err)
	}

	cases := get(ref, "cases").([]any)
	if len(cases) < 100 {
		t.Fatalf("only %d reference cases", len(cases))
	}
	for _, c := range cases {
		c := c.(*jinja.Map)
		name := get(c, "model").(string) + "/" + get(c, "name").(string)
		agp := get(c, "add_generation_prompt").(bool)
		if agp {
			name += "/gen"
		}
		t.Run(name, func(t *testing.T) {
			m := models[get(c, "model").(string)]
			got, err := renderCase(m.templates, m.err, m.special, c, agp)
			if wantErr, ok := c.Get("error"); ok {
				if err == nil {
					t.Fatalf("rendered %q, transformers failed: %s", got, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := get(c, "output").(string); got != want {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func renderCase(ct *jinja.ChatTemplates, ctErr error, special map[string]any, c *jinja.Map, agp bool) (string, error) {
	if ctErr != nil {
		return "", ctErr
	}
	tools := get(c, "tools")
	src, err := ct.Select("", tools != nil)
	if err != nil {
		return "", err
	}
	tmpl, err := jinja.Parse(src)
	if err != nil {
		return "", err
	}
	vars := map[string]any{}
	for k, v := range special {
		vars[k] = v
	}
	kw := get(c, "kwargs").(*jinja.Map)
	for _, k := range kw.Keys() {
		vars[k] = get(kw, k)
	}
	if tools != nil {
		vars["tools"] = tools
	}
	var msgs []map[string]any
	for _, m := range get(c, "messages").([]any) {
		mm := m.(*jinja.Map)
		x := map[string]any{}
		for _, k := range mm.Keys() {
			x[k] = get(mm, k)
		}
		msgs = append(msgs, x)
	}
	return jinja.RenderChat(tmpl, msgs, agp, vars)
}

// sameJSON compares a Go value with one DecodeJSON made.
func sameJSON(got, want any) bool {
	switch w := want.(type) {
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameJSON(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return got == want
}
