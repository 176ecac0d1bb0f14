//go:build race

package decompress

// raceEnabled: the race detector adds allocations of its own and makes
// sync.Pool drop items, so the allocation bounds are checked without it.
const raceEnabled = true
