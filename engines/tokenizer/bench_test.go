package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

// BenchmarkEncodeBodies encodes the texts of $EAS_BENCH_BODIES (request
// bodies {"text": "..."}, one a line) with $EAS_BENCH_TOKENIZER
// (a tokenizer.json), one text per op, special tokens added, as
// processors/textencoder does per request; scripts/bench-text-embedding.sh
// runs it to put tokenization's CPU beside the server's. Skipped without
// the variables.
func BenchmarkEncodeBodies(b *testing.B) {
	bodies, tj := os.Getenv("EAS_BENCH_BODIES"), os.Getenv("EAS_BENCH_TOKENIZER")
	if bodies == "" || tj == "" {
		b.Skip("set EAS_BENCH_BODIES and EAS_BENCH_TOKENIZER")
	}
	raw, err := os.ReadFile(bodies)
	if err != nil {
		b.Fatal(err)
	}
	var texts []string
	var size int64
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" {
			continue
		}
		var r struct{ Text string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			b.Fatal(err)
		}
		texts = append(texts, r.Text)
		size += int64(len(r.Text))
	}
	tk, err := tokenizer.LoadTokenizerFile(tj)
	if err != nil {
		b.Fatal(err)
	}
	tk = tk.WithPadding(nil) // text_encoder pads the batch itself
	b.SetBytes(size / int64(len(texts)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tk.Encode(texts[i%len(texts)], true); err != nil {
			b.Fatal(err)
		}
	}
}
