//go:build !race

package decompress

const raceEnabled = false
