package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/require"
)

func benchCorpus(b *testing.B) ([]string, int64) {
	raw, err := os.ReadFile(filepath.Join(require.RepoRoot(), "engines", "tokenizer", "testdata", "corpus.json"))
	if err != nil {
		b.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(raw, &corpus); err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, s := range corpus {
		n += int64(len(s))
	}
	return corpus, n
}

// BenchmarkEncode encodes testdata/corpus.json (the parity tests' corpus)
// with each real tokenizer, special tokens added, on one goroutine;
// scripts/bench-tokenizers.sh runs it beside tokenizers' single-thread
// throughput on the same texts (testdata/bench_hf.py).
func BenchmarkEncode(b *testing.B) {
	corpus, size := benchCorpus(b)
	for _, rt := range realTokenizers {
		b.Run(rt.name, func(b *testing.B) {
			dir := needCache(b, rt)
			tk, err := rt.load(b, dir).WithTruncation(nil)
			if err != nil {
				b.Fatal(err)
			}
			tk = tk.WithPadding(nil)
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, s := range corpus {
					if _, err := tk.Encode(s, true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	_ = tokenizer.MaxTokenizerJSONBytes
}
