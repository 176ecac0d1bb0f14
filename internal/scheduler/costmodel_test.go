package scheduler

import (
	"math"
	"testing"
	"time"
)

func TestCostModelFitsFixedAndPerRowCost(t *testing.T) {
	var m costModel
	if m.waitPays(10) != true {
		t.Fatal("an unknown model must leave the decision to the earlier rule")
	}
	// t(b) = 0.8 ms + 0.16 ms per row: a CPU model.
	for i := range 200 {
		b := 20 + i%40
		m.noteRun(b, time.Duration(800+160*b)*time.Microsecond)
	}
	fixed, ok := m.fixedCost()
	if !ok || math.Abs(fixed-0.0008) > 1e-6 {
		t.Fatalf("fixed cost %v (%v), want 0.8 ms", fixed, ok)
	}
	// Requests every 0.3 ms: λ·fixed ≈ 2.7 requests, less than any batch
	// of 3 or more, so waiting cannot pay.
	now := time.Now()
	for i := range 100 {
		m.noteArrival(now.Add(time.Duration(i) * 300 * time.Microsecond))
	}
	if m.waitPays(3) || m.waitPays(40) {
		t.Error("a model whose cost is per row waits to fill its batch")
	}
	if !m.waitPays(2) {
		t.Error("a batch smaller than the arrivals of one fixed cost does not wait")
	}
}

func TestCostModelWaitsForAFixedCostModel(t *testing.T) {
	var m costModel
	// t(b) = 20 ms + 0.05 ms per row: most of a run is fixed (a GPU, a
	// remote call); at a request every 0.3 ms, 66 arrive per fixed cost.
	for i := range 200 {
		b := 8 + i%24
		m.noteRun(b, time.Duration(20000+50*b)*time.Microsecond)
	}
	now := time.Now()
	for i := range 100 {
		m.noteArrival(now.Add(time.Duration(i) * 300 * time.Microsecond))
	}
	if !m.waitPays(32) {
		t.Error("a model with a large fixed cost does not wait to fill its batch")
	}
}

func TestCostModelNeedsSpreadInBatchSizes(t *testing.T) {
	var m costModel
	for range 100 {
		m.noteRun(64, 10*time.Millisecond) // always full: fixed cost unknown
	}
	if _, ok := m.fixedCost(); ok {
		t.Error("a fixed cost was fitted from runs of one size")
	}
}
