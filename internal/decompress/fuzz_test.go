package decompress

import (
	"errors"
	"testing"

	"github.com/pierrec/lz4/v4"
)

const fuzzLimit = 1 << 20

// FuzzDecompress feeds arbitrary bodies to every decompressor. It must never
// panic, never return more than the limit, and fail only with ErrTooLarge or
// ErrCorrupt. For raw LZ4 blocks it also checks the size walk against the
// library decoder: whenever the decoder accepts a block, Decompress must
// return the same bytes.
func FuzzDecompress(f *testing.F) {
	payload := []byte(`[{"sex":0,"cp":1,"fbs":1},{"sex":1,"cp":0,"fbs":1}]`)
	for i, kind := range kinds {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), []byte("not compressed"))
		for variant, compress := range compressors {
			if kindOf(variant) == kind {
				body := compress(f, payload)
				f.Add(uint8(i), body)
				f.Add(uint8(i), body[:len(body)/2])
			}
		}
	}
	bomb, _ := lz4Bomb(8)
	f.Add(uint8(1), bomb)
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := kinds[int(k)%len(kinds)]
		out, err := Decompress(kind, body, fuzzLimit)
		if err != nil {
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: error %v is neither ErrTooLarge nor ErrCorrupt", kind, err)
			}
			if out != nil {
				t.Fatalf("%s: output returned with error %v", kind, err)
			}
		} else if len(out) > fuzzLimit {
			t.Fatalf("%s: %d bytes out, limit %d", kind, len(out), fuzzLimit)
		}

		if kind != LZ4 || len(body) == 0 || len(body) >= 4 && string(body[:4]) == string(lz4FrameMagic) {
			return
		}
		ref := make([]byte, fuzzLimit)
		n, refErr := lz4.UncompressBlock(body, ref)
		if refErr != nil {
			return // the decoder refuses it (or it is over the limit); Decompress already failed cleanly
		}
		if err != nil {
			t.Fatalf("lz4 decoder accepts the block (%d bytes) but Decompress fails: %v", n, err)
		}
		if string(out) != string(ref[:n]) {
			t.Fatalf("lz4 block: Decompress gave %d bytes, the decoder %d", len(out), n)
		}
	})
}
