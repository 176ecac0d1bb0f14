//go:build race

package server

// raceEnabled: the race detector adds allocations, so allocation tests skip.
const raceEnabled = true
