package llm

import (
	"os"

	"golang.org/x/sys/unix"
)

// The slot cache's buffers on Linux: anonymous mappings, so that the
// kernel gives a page only where a token's keys and values are written
// (a slot's columns for the whole context cost nothing until used), a
// slot's pages go back when its tokens go, and the slots grow by remapping
// (no copy, however many tokens the running sequences hold).

// growBytes returns b grown (or, for nil, made) to n bytes, its contents
// kept and the rest zero.
func growBytes(b []byte, n int) ([]byte, error) {
	if b == nil {
		return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	}
	return unix.Mremap(b, n, unix.MREMAP_MAYMOVE)
}

// freeBytes returns b, made by growBytes, to the system.
func freeBytes(b []byte) {
	if b != nil {
		_ = unix.Munmap(b)
	}
}

// dropPages returns the whole pages of b[from:to] to the system (they read
// as zero afterwards); b starts on a page, as growBytes's do.
func dropPages(b []byte, from, to int) {
	ps := os.Getpagesize()
	from, to = (from+ps-1)/ps*ps, to/ps*ps
	if from < to {
		_ = unix.Madvise(b[from:to], unix.MADV_DONTNEED)
	}
}
