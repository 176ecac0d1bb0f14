//go:build !linux

package llm

// The slot cache's buffers elsewhere than Linux: Go memory, copied when
// the slots grow, and held whole until every slot is empty.

// growBytes returns b grown (or, for nil, made) to n bytes, its contents
// kept and the rest zero.
func growBytes(b []byte, n int) ([]byte, error) {
	g := make([]byte, n)
	copy(g, b)
	return g, nil
}

// freeBytes lets the collector have b.
func freeBytes([]byte) {}

// dropPages does nothing here: the tokens past a slot's are never read.
func dropPages([]byte, int, int) {}
