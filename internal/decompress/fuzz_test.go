package decompress

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
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

// checkBounded asserts the contract every decompressor keeps for any body
// and limit: no panic, never more than limit bytes out, and an error only
// ErrTooLarge or ErrCorrupt, without output.
func checkBounded(t *testing.T, kind string, body []byte, limit int64) ([]byte, error) {
	t.Helper()
	out, err := Decompress(kind, body, limit)
	if err != nil {
		if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: error %v is neither ErrTooLarge nor ErrCorrupt", kind, err)
		}
		if errors.Is(err, ErrTooLarge) && errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: error %v is both too large and corrupt", kind, err)
		}
		if out != nil {
			t.Fatalf("%s: output returned with error %v", kind, err)
		}
		return nil, err
	}
	if out == nil {
		t.Fatalf("%s: nil output without an error", kind)
	}
	if int64(len(out)) > limit {
		t.Fatalf("%s: %d bytes out, limit %d", kind, len(out), limit)
	}
	return out, nil
}

// fuzzKind seeds a per-kind target with real encoder output, truncations,
// the declared-length bodies of issue 14 and any extra seeds, and runs
// check (if any) after the common bound checks. The limit is fuzzed too,
// so that the bound is exercised at every size, not only at fuzzLimit.
func fuzzKind(f *testing.F, kind string, extra [][]byte, check func(t *testing.T, body []byte, limit int64, out []byte, err error)) {
	payload := []byte(`[{"sex":0,"cp":1,"fbs":1},{"sex":1,"cp":0,"fbs":1}]`)
	for variant, compress := range compressors {
		if kindOf(variant) != kind {
			continue
		}
		body := compress(f, payload)
		f.Add(body, uint32(len(payload)))
		f.Add(body, uint32(len(payload)-1))
		f.Add(body[:len(body)/2], uint32(fuzzLimit))
	}
	for _, c := range declaredBodies() {
		if c.kind == kind {
			f.Add(c.body, uint32(fuzzLimit))
		}
	}
	for _, b := range extra {
		f.Add(b, uint32(fuzzLimit))
	}
	f.Add([]byte("not compressed"), uint32(100))
	f.Fuzz(func(t *testing.T, body []byte, l uint32) {
		limit := int64(l%fuzzLimit) + 1
		out, err := checkBounded(t, kind, body, limit)
		if check != nil {
			check(t, body, limit, out, err)
		}
	})
}

func FuzzGzip(f *testing.F) { fuzzKind(f, Gzip, nil, nil) }

func FuzzZlib(f *testing.F) { fuzzKind(f, Zlib, nil, nil) }

// FuzzSnappy also checks the element walk against the library decoder:
// whenever snappy.Decode accepts a raw block within the limit, Decompress
// must return the same bytes, and it must refuse every block whose declared
// length the walk or the expansion bound rejects.
func FuzzSnappy(f *testing.F) {
	fuzzKind(f, Snappy, nil, func(t *testing.T, body []byte, limit int64, out []byte, err error) {
		if len(body) == 0 || bytes.HasPrefix(body, snappyStreamID) {
			return
		}
		n, lenErr := snappy.DecodedLen(body)
		if lenErr != nil || int64(n) > limit {
			return
		}
		ref, refErr := snappy.Decode(nil, body)
		if refErr != nil {
			if err == nil {
				t.Fatalf("snappy decoder refuses the block (%v) but Decompress gives %d bytes", refErr, len(out))
			}
			return
		}
		if err != nil {
			t.Fatalf("snappy decoder accepts the block (%d bytes) but Decompress fails: %v", len(ref), err)
		}
		if !bytes.Equal(out, ref) {
			t.Fatalf("snappy block: Decompress gave %d bytes, the decoder %d", len(out), len(ref))
		}
	})
}

// FuzzZstd also checks DecodeAll against the library's streaming reader,
// which the package used before: whatever the reader decodes within the
// limit, Decompress must decode to the same bytes.
func FuzzZstd(f *testing.F) {
	fuzzKind(f, Zstd, nil, func(t *testing.T, body []byte, limit int64, out []byte, err error) {
		if len(body) == 0 {
			return
		}
		zr, zerr := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(fuzzLimit+1))
		if zerr != nil {
			t.Fatal(zerr)
		}
		defer zr.Close()
		ref, refErr := io.ReadAll(io.LimitReader(zr, limit+1))
		if refErr != nil || int64(len(ref)) > limit {
			return
		}
		if err != nil {
			t.Fatalf("zstd reader decodes %d bytes but Decompress fails: %v", len(ref), err)
		}
		if !bytes.Equal(out, ref) {
			t.Fatalf("zstd: Decompress gave %d bytes, the reader %d", len(out), len(ref))
		}
	})
}

func FuzzLZ4(f *testing.F) {
	bomb, _ := lz4Bomb(8)
	fuzzKind(f, LZ4, [][]byte{bomb}, nil)
}
