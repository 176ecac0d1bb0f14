package decompress

import (
	"bytes"
	"errors"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

// serverLimit is the server's default body limit (--max-body-size).
const serverLimit = 64 << 20

// declaredBody is a tiny body whose header declares far more output than its
// data can produce (issue 14). ok reports whether the body is valid.
type declaredBody struct {
	name string
	kind string
	body []byte
	ok   bool
}

func declaredBodies() []declaredBody {
	// The snappy block header is the decoded length as a varint.
	snappyHeader := func(n uint64, rest ...byte) []byte {
		var b []byte
		for ; n >= 0x80; n >>= 7 {
			b = append(b, byte(n)|0x80)
		}
		return append(append(b, byte(n)), rest...)
	}
	// 4 literal bytes, then 2-byte-offset copies of 64 bytes (the densest
	// element): valid right up to its last element.
	dense := snappyHeader(4+64*30, 0x0c, 'a', 'b', 'c', 'd')
	for range 30 {
		dense = append(dense, 0xfe, 0x04, 0x00)
	}
	return []declaredBody{
		// The reported attack: 6 bytes declaring 64 MiB, the server's limit.
		{"snappy 64MiB in 6 bytes", Snappy, snappyHeader(64<<20, 0, 0), false},
		{"snappy 64MiB-1 in 6 bytes", Snappy, snappyHeader(64<<20-1, 0, 0), false},
		{"snappy 4GiB-1 in 7 bytes", Snappy, snappyHeader(1<<32-1, 0, 0), false},
		{"snappy 32MiB header only", Snappy, snappyHeader(32 << 20), false},
		{"snappy 64MiB one literal", Snappy, snappyHeader(64<<20, 0x00, 'x'), false},
		// Within the 22x expansion bound but the elements add up to less.
		{"snappy 2KiB in 100 literal bytes", Snappy, snappyHeader(2048, append([]byte{0xfc, 0x62}, make([]byte, 99)...)...), false},
		// The densest valid block decodes fine, and one byte more declared
		// than it produces is refused.
		{"snappy densest valid", Snappy, dense, true},
		{"snappy densest plus one", Snappy, append(snappyHeader(4+64*30+1), dense[2:]...), false},
		// A body that starts like a framed stream but whose stream fails is
		// tried as a block, whose header declares 895 bytes.
		{"snappy stream id then nothing", Snappy, []byte("\xff\x06\x00\x00sNaPpY\x00\x00\x00\x00"), false},
		// zstd: a 10-byte frame with a 64 MiB window and one raw byte; the
		// streaming reader allocated the whole window before decoding it.
		{"zstd 64MiB window", Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x80, 0x09, 0x00, 0x00, 'x'}, true},
		// zstd: a frame declaring 64 MiB of content with one raw byte.
		{"zstd 64MiB content size", Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00, 0x00, 0x00, 0x04, 0x09, 0x00, 0x00, 'x'}, false},
		{"zstd 4GiB content size", Zstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0xff, 0xff, 0xff, 0xff, 0x09, 0x00, 0x00, 'x'}, false},
		// lz4: a raw block whose match length runs to 64 MiB.
		{"lz4 block 64MiB+ match", LZ4, func() []byte { b, _ := lz4Bomb(64<<20/255 + 1); return b }(), false},
	}
}

// allocated returns the bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDeclaredLengthNotAllocated is the regression test for issue 14: a
// body whose header declares a large output is refused, or decoded, without
// allocating the declared size. Run without -race (see the Makefile).
func TestDeclaredLengthNotAllocated(t *testing.T) {
	for _, c := range declaredBodies() {
		t.Run(c.name, func(t *testing.T) {
			var (
				out []byte
				err error
			)
			n := allocated(func() { out, err = Decompress(c.kind, c.body, serverLimit) })
			if c.ok {
				if err != nil {
					t.Fatalf("valid %d-byte body refused: %v", len(c.body), err)
				}
			} else if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d-byte body: %d bytes out, err = %v; want ErrTooLarge or ErrCorrupt", len(c.body), len(out), err)
			}
			if raceEnabled {
				return // the race detector inflates allocations
			}
			// 1 MiB leaves room for the decoders' own tables; the attack
			// allocated 64 MiB per request.
			if n > 1<<20 {
				t.Fatalf("%d-byte body allocated %d bytes (err %v)", len(c.body), n, err)
			}
		})
	}
}

// TestDeclaredLengthMemoryReturns replays issue 14's load: 640 such bodies
// from concurrent clients. The heap must not grow by the declared sizes
// while they run, and must return to its baseline afterwards. Run without
// -race (see the Makefile).
func TestDeclaredLengthMemoryReturns(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates allocations")
	}
	const (
		clients  = 8
		requests = 640
	)
	bodies := declaredBodies()
	var before, after runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&before)

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Go(func() {
			for i := w; i < requests; i += clients {
				c := bodies[i%len(bodies)]
				_, err := Decompress(c.kind, c.body, serverLimit)
				if (err != nil) == c.ok {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected result: %v", err)
	}
	runtime.ReadMemStats(&after)
	// HeapSys is the heap obtained from the OS: it grows with the peak of
	// what was live at once, as the server's RSS did.
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew > 64<<20 {
		t.Errorf("heap obtained from the OS grew by %d MiB during %d requests", grew>>20, requests)
	}
	if per := (after.TotalAlloc - before.TotalAlloc) / requests; per > 256<<10 {
		t.Errorf("%d bytes allocated per request", per)
	}
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Errorf("heap in use %d MiB above the baseline after GC", grew>>20)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("heap allocated %d MiB above the baseline after GC", grew>>20)
	}
}

// TestSnappyBlockLenMatchesDecoder checks the element walk on real encoder
// output: it must add up to the declared length exactly.
func TestSnappyBlockLenMatchesDecoder(t *testing.T) {
	for name, p := range payloads() {
		body := compressors["snappy"](t, p)
		got, err := Decompress(Snappy, body, int64(len(p)))
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("%s: %d bytes, %v", name, len(got), err)
		}
	}
}
