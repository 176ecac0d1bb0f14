package textencoder_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eas-server/eas-server/processors/textencoder"
)

// TestBatchEqualsAlone is the proof that sharing a run changes no answer:
// texts of very different lengths run as one batch padded to the longest,
// and each alone; every answer agrees (pooling none included: each
// token's vector).
func TestBatchEqualsAlone(t *testing.T) {
	dir, _, lm := models(t)
	var bodies [][]byte
	for _, s := range texts {
		b, _ := json.Marshal(map[string]string{"text": s})
		bodies = append(bodies, b)
	}
	cases := []struct{ name, path, mc string }{
		{"bert mean", filepath.Join(dir, "bert"), `{"pooling": "mean", "normalize": true}`},
		{"bert max", filepath.Join(dir, "bert"), `{"pooling": "max"}`},
		{"bert cls", filepath.Join(dir, "bert"), `{"pooling": "cls"}`},
		{"bert none", filepath.Join(dir, "bert"), `{"pooling": "none"}`},
		{"onnx", filepath.Join(dir, "onnx"), `{}`},
		{"classifier", filepath.Join(dir, "classifier"), `{"top_k": 2}`},
	}
	if lm {
		cases = append(cases, struct{ name, path, mc string }{"minilm", minilmDir(), `{}`})
	}
	for _, c := range cases {
		shared, alone, err := textencoder.BatchedEqualsAlone(c.path, []byte(c.mc), bodies)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if slices.Min(alone) == shared {
			t.Errorf("%s: every text ran at the shared length %d: the test shows nothing", c.name, shared)
		}
		t.Logf("%s: %d texts of %v positions alone, %d together", c.name, len(alone), alone, shared)
	}
}
