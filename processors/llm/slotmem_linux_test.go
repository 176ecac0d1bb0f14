package llm

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestSlotMemory: a mapping takes pages where written only, keeps its
// contents when grown, and dropPages returns the whole pages inside the
// range (reading zero after) while the pages it only touches keep their
// bytes.
func TestSlotMemory(t *testing.T) {
	ps := os.Getpagesize()
	resident := func(b []byte) []bool {
		t.Helper()
		v := make([]byte, (len(b)+ps-1)/ps)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&v[0]))); e != 0 {
			t.Fatal(e)
		}
		r := make([]bool, len(v))
		for i, x := range v {
			r[i] = x&1 == 1
		}
		return r
	}
	b, err := growBytes(nil, 8*ps)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { freeBytes(b) }()
	b[0], b[3*ps] = 1, 2
	if r := resident(b); !r[0] || r[1] || r[2] || !r[3] || r[4] {
		t.Fatalf("resident pages %v, want 0 and 3 only", r)
	}
	if b, err = growBytes(b, 64*ps); err != nil {
		t.Fatal(err)
	}
	if b[0] != 1 || b[3*ps] != 2 || b[63*ps] != 0 {
		t.Fatalf("after growing: %d %d %d, want 1 2 0", b[0], b[3*ps], b[63*ps])
	}
	for i := range 8 * ps {
		b[i] = 7
	}
	dropPages(b, ps/2, 5*ps+1) // pages 1-4 inside; 0 and 5 only touched
	r := resident(b)
	for i, want := range []bool{true, false, false, false, false, true} {
		if r[i] != want {
			t.Fatalf("after dropPages: resident %v, want pages 0 and 5 kept", r[:8])
		}
	}
	if b[ps/2] != 7 || b[ps] != 0 || b[5*ps-1] != 0 || b[5*ps] != 7 {
		t.Fatalf("after dropPages: bytes %d %d %d %d, want 7 0 0 7", b[ps/2], b[ps], b[5*ps-1], b[5*ps])
	}
}
