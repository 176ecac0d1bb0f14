//go:build !race

package pmml

const raceEnabled = false
