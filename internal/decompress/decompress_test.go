package decompress

import (
	"bytes"
	stdgzip "compress/gzip"
	stdzlib "compress/zlib"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressors produce each kind with the real encoders, in every variant an
// EAS client may send.
var compressors = map[string]func(t testing.TB, b []byte) []byte{
	"gzip": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := stdgzip.NewWriter(&buf)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"gzip/two members": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		half := len(b) / 2
		for _, part := range [][]byte{b[:half], b[half:]} {
			w := stdgzip.NewWriter(&buf)
			mustWrite(t, w, part)
		}
		return buf.Bytes()
	},
	"zlib": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w, _ := stdzlib.NewWriterLevel(&buf, stdzlib.BestCompression)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"snappy": func(t testing.TB, b []byte) []byte { return snappy.Encode(nil, b) },
	"snappy/stream": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := snappy.NewBufferedWriter(&buf)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"zstd": func(t testing.TB, b []byte) []byte {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(b, nil)
	},
	"zstd/stream": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"lz4": func(t testing.TB, b []byte) []byte {
		dst := make([]byte, lz4.CompressBlockBound(len(b)))
		var c lz4.Compressor
		n, err := c.CompressBlock(b, dst)
		if err != nil || n == 0 {
			t.Fatalf("lz4 block: n=%d err=%v", n, err)
		}
		return dst[:n]
	},
	"lz4/hc": func(t testing.TB, b []byte) []byte {
		dst := make([]byte, lz4.CompressBlockBound(len(b)))
		var c lz4.CompressorHC
		n, err := c.CompressBlock(b, dst)
		if err != nil || n == 0 {
			t.Fatalf("lz4 hc block: n=%d err=%v", n, err)
		}
		return dst[:n]
	},
	"lz4/frame": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.ChecksumOption(true), lz4.BlockChecksumOption(true)); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, w, b)
		return buf.Bytes()
	},
}

type writeCloser interface {
	Write([]byte) (int, error)
	Close() error
}

func mustWrite(t testing.TB, w writeCloser, b []byte) {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func kindOf(variant string) string { k, _, _ := strings.Cut(variant, "/"); return k }

func payloads() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 200_000)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	text := []byte(strings.Repeat(`[{"sex":0,"cp":1,"fbs":1},{"sex":1,"cp":0,"fbs":1}]`, 5000))
	return map[string][]byte{
		"one byte":   {'x'},
		"short text": []byte("hello, eas"),
		"json 250k":  text,
		"random":     random,
		"zeros 1MiB": make([]byte, 1<<20),
	}
}

func TestRoundTrip(t *testing.T) {
	for variant, compress := range compressors {
		for name, want := range payloads() {
			t.Run(variant+"/"+name, func(t *testing.T) {
				body := compress(t, want)
				got, err := Decompress(kindOf(variant), body, int64(len(want)))
				if err != nil {
					t.Fatalf("Decompress at exact limit: %v", err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("round trip differs: got %d bytes, want %d", len(got), len(want))
				}
				// One byte less than the output must be refused as too large.
				_, err = Decompress(kindOf(variant), body, int64(len(want))-1)
				if len(want) > 1 && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("limit %d: err = %v, want ErrTooLarge", len(want)-1, err)
				}
			})
		}
	}
}

func TestBomb(t *testing.T) {
	const size = 4 << 20 // 16 times the limit; snappy, the weakest, still shrinks it about 20x
	zeros := make([]byte, size)
	const limit = 256 << 10
	for variant, compress := range compressors {
		t.Run(variant, func(t *testing.T) {
			body := compress(t, zeros)
			if len(body) > size/16 {
				t.Fatalf("compressed bomb is %d bytes; not a bomb", len(body))
			}
			_, err := Decompress(kindOf(variant), body, limit)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			if !strings.Contains(err.Error(), "262144 bytes") {
				t.Errorf("error %q does not name the limit", err)
			}
		})
	}
}

// lz4Bomb builds a raw LZ4 block by hand: one literal 'a', a match at
// offset 1 whose length is extended by n bytes of 0xff, and a final literal
// 'b'. It decodes to 1+(15+255*n+4) 'a's and one 'b'.
func lz4Bomb(n int) (block []byte, decodedLen int) {
	block = []byte{0x1f, 'a', 0x01, 0x00}
	block = append(block, bytes.Repeat([]byte{0xff}, n)...)
	block = append(block, 0x00, 0x10, 'b')
	return block, 1 + 15 + 255*n + 4 + 1
}

func TestLZ4HandBuiltBlock(t *testing.T) {
	block, n := lz4Bomb(1000)
	got, err := Decompress(LZ4, block, int64(n))
	if err != nil {
		t.Fatalf("Decompress: %v", err)
	}
	want := append(bytes.Repeat([]byte{'a'}, n-1), 'b')
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
	// The size walk refuses a huge block before allocating its output.
	big, bigN := lz4Bomb(4 << 20) // about 1 GiB of output from 4 MiB
	allocs := testing.AllocsPerRun(1, func() {
		_, err = Decompress(LZ4, big, 1<<20)
	})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d-byte bomb: err = %v, want ErrTooLarge", bigN, err)
	}
	if allocs > 20 {
		t.Errorf("refusing the bomb allocated %v times", allocs)
	}
	// A literal-only block, as the reference encoder writes for tiny inputs.
	got, err = Decompress(LZ4, []byte{0x50, 'h', 'e', 'l', 'l', 'o'}, 5)
	if err != nil || string(got) != "hello" {
		t.Fatalf("literal block: %q, %v", got, err)
	}
}

func TestCorrupt(t *testing.T) {
	text := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 200))
	for variant, compress := range compressors {
		body := compress(t, text)
		kind := kindOf(variant)
		cases := map[string][]byte{
			"truncated":     body[:len(body)*2/3],
			"garbage":       []byte("this is not compressed at all, just plain text of some length"),
			"flipped early": flip(body, 1),
			"flipped tail":  flip(body, len(body)-3),
		}
		for name, bad := range cases {
			t.Run(variant+"/"+name, func(t *testing.T) {
				out, err := Decompress(kind, bad, 1<<20)
				if err == nil {
					// A flip inside unchecked data may still decode; it
					// must not decode to the original then.
					if name == "flipped early" || name == "flipped tail" {
						if bytes.Equal(out, text) {
							t.Fatalf("flipped body decoded to the original")
						}
						return
					}
					t.Fatalf("decoded %d bytes from a %s body, want an error", len(out), name)
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				if errors.Is(err, ErrTooLarge) {
					t.Fatalf("err = %v is both corrupt and too large", err)
				}
			})
		}
	}
}

func flip(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 0x55
	return c
}

// TestChecksummedFormatsDetectFlips checks that the formats with a checksum
// over the content reject a flipped byte in the middle of the payload.
func TestChecksummedFormatsDetectFlips(t *testing.T) {
	text := []byte(strings.Repeat("abcdefghij", 1000))
	for _, variant := range []string{"gzip", "zlib", "snappy/stream", "zstd", "lz4/frame"} {
		t.Run(variant, func(t *testing.T) {
			body := compressors[variant](t, text)
			_, err := Decompress(kindOf(variant), flip(body, len(body)/2), 1<<20)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestKindsAndValid(t *testing.T) {
	want := []string{"gzip", "lz4", "snappy", "zlib", "zstd"}
	if got := Kinds(); !slices.Equal(got, want) {
		t.Fatalf("Kinds = %v, want %v", got, want)
	}
	Kinds()[0] = "mutated"
	if Kinds()[0] != "gzip" {
		t.Fatal("Kinds returns the package's own slice")
	}
	for _, k := range want {
		if !Valid(k) {
			t.Errorf("Valid(%q) = false", k)
		}
	}
	for _, k := range []string{"", "GZIP", "Gzip", "deflate", "brotli", "lz4 "} {
		if Valid(k) {
			t.Errorf("Valid(%q) = true", k)
		}
	}
}

func TestUnknownKindAndLimits(t *testing.T) {
	_, err := Decompress("brotli", []byte("x"), 10)
	if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "gzip, lz4, snappy, zlib, zstd") {
		t.Fatalf("err = %v, want ErrUnknownKind listing the known kinds", err)
	}
	if _, err := Decompress("gzip", []byte("x"), 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
	body := []byte("plain")
	if got, err := Decompress("", body, 1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("no decompressor: %q, %v", got, err)
	}
	for _, k := range Kinds() {
		got, err := Decompress(k, nil, 10)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("%s empty body: %q, %v; want empty, nil", k, got, err)
		}
	}
	// A huge limit must not overflow the limit arithmetic.
	gz := compressors["gzip"](t, []byte("ok"))
	if got, err := Decompress("gzip", gz, 1<<63-1); err != nil || string(got) != "ok" {
		t.Fatalf("max limit: %q, %v", got, err)
	}
	lz, _ := lz4Bomb(10)
	if _, err := Decompress("lz4", lz, 1<<63-1); err != nil {
		t.Fatalf("lz4 with max limit: %v", err)
	}
}

func BenchmarkDecompress(b *testing.B) {
	text := []byte(strings.Repeat(`[{"sex":0,"cp":1,"fbs":1},{"sex":1,"cp":0,"fbs":1}]`, 2000))
	for _, variant := range []string{"gzip", "zlib", "snappy", "zstd", "lz4", "lz4/frame"} {
		body := compressors[variant](b, text)
		b.Run(variant, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := Decompress(kindOf(variant), body, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
