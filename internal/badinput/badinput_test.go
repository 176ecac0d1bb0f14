package badinput

import (
	"errors"
	"fmt"
	"testing"
)

func TestIs(t *testing.T) {
	err := Errorf("input %q: shape %v", "x", []int{2})
	if err.Error() != `input "x": shape [2]` {
		t.Fatalf("message %q", err)
	}
	if !Is(err) || !Is(fmt.Errorf("decode: %w", err)) {
		t.Fatal("Is misses a bad-input error")
	}
	if Is(errors.New("disk full")) || Is(nil) {
		t.Fatal("Is takes a server error for bad input")
	}
}
