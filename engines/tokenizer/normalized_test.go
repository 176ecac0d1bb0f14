package tokenizer

import (
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzNormalize: the Unicode forms, rewritten chunk by chunk with
// alignments, give the text norm gives, every byte aligned inside the
// original; the BERT normalizer keeps its alignments inside it too.
func FuzzNormalize(f *testing.F) {
	f.Add("e\u0301cole a\u0308\u0323 ﬁ ™ ① 한국어 Å Ω \u0f73 \u1e9b\u0323")
	f.Add("\u0300\u0301abc")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		check := func(name string, n normString, want string) {
			if want != "" && n.norm != want {
				t.Fatalf("%s(%q) = %q, want %q", name, s, n.norm, want)
			}
			if n.align != nil && len(n.align) != len(n.norm) {
				t.Fatalf("%s(%q): %d alignments for %d bytes", name, s, len(n.align), len(n.norm))
			}
			for i := range n.norm {
				a := n.alignAt(i)
				if a.a < 0 || a.b < a.a || int(a.b) > len(s) {
					t.Fatalf("%s(%q): byte %d aligned to %v", name, s, i, a)
				}
			}
		}
		for _, form := range []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD} {
			n := newNormString(s)
			unicodeNormalize(&n, form)
			check("norm", n, form.String(s))
		}
		n := newNormString(s)
		bertNormalizer{clean: true, chinese: true, stripAccents: true, lower: true}.normalize(&n)
		check("bert", n, "")
	})
}
