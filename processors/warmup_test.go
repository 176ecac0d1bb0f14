package processors

import (
	"bytes"
	"testing"
)

func FuzzParseWarmup(f *testing.F) {
	f.Add([]byte("plain request body"))
	f.Add(EncodeWarmup([][]byte{[]byte("a"), []byte("bc"), nil}))
	f.Add([]byte(WarmupMagic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Add([]byte(WarmupMagic + "\x05ab"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bodies, err := ParseWarmup(data)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(data, []byte(WarmupMagic)) {
			if len(bodies) != 1 || !bytes.Equal(bodies[0], data) {
				t.Fatalf("plain file split into %d bodies", len(bodies))
			}
			return
		}
		if again := EncodeWarmup(bodies); !bytes.Equal(again, data) {
			// Varints may be non-minimal in the input; re-parse instead.
			b2, err := ParseWarmup(again)
			if err != nil || len(b2) != len(bodies) {
				t.Fatalf("re-encoded file parses to %d bodies, %v", len(b2), err)
			}
		}
	})
}
