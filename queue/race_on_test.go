//go:build race

package queue

// raceEnabled: the race detector adds allocations and slows reads, so the
// allocation tests skip.
const raceEnabled = true
