package readme

import (
	"strings"
	"testing"
)

func TestSplice(t *testing.T) {
	doc := "# Title\n\nbefore\n" + Begin + "\nold\nlines\n" + End + "\nafter\n"
	out, err := Splice([]byte(doc), "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nbefore\n" + Begin + "\nnew\n" + End + "\nafter\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if s, err := Section(out); err != nil || s != "new\n" {
		t.Errorf("section %q, %v", s, err)
	}
	// Splicing what is there changes nothing.
	again, err := Splice(out, "new\n")
	if err != nil || string(again) != want {
		t.Errorf("second splice: %q, %v", again, err)
	}
}

func TestSpliceErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"no markers":      "text\n",
		"no end":          Begin + "\nx\n",
		"no begin":        "x\n" + End + "\n",
		"reversed":        End + "\n" + Begin + "\n",
		"begin twice":     Begin + "\n" + Begin + "\n" + End + "\n",
		"end twice":       Begin + "\n" + End + "\n" + End + "\n",
		"marker mid-line": "see " + Begin + "\n" + End + "\n",
	} {
		if _, err := Splice([]byte(doc), "x\n"); err == nil {
			t.Errorf("%s: no error", name)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("%s: empty error", name)
		}
	}
}
