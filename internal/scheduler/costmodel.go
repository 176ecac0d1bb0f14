package scheduler

import "time"

// costModel learns what one run of the model costs, t(b) = fixed + perRow*b,
// from the runs the scheduler makes, and the rate at which requests arrive.
// A partial batch waits for more requests only when that can raise the
// throughput: with batch b and arrival rate λ, waiting w for λw more rows
// gives (b+λw)/(w+fixed+perRow*(b+λw)) rows per unit of time, which grows
// with w exactly when λ*fixed > b. So a model whose runs cost mostly per
// row (a CPU model) never waits while a worker is idle, and one with a
// large fixed cost per run (a GPU model, a remote call) waits to fill its
// batch.
//
// The fit is a least-squares line over exponentially decayed sums, so it
// follows a model whose cost changes (warm-up, another service starting).
// All methods are called with the scheduler's mu held.
type costModel struct {
	sw, sb, st, sbb, sbt float64 // decayed sums of 1, b, t, b², b·t (t in seconds)

	lastArrival time.Time
	gap         float64 // decayed mean time between arrivals, seconds; 0 = unknown
}

// decay weighs the last few hundred runs.
const decay = 0.99

// noteRun records one run of b requests that took d.
func (m *costModel) noteRun(b int, d time.Duration) {
	x, t := float64(b), d.Seconds()
	m.sw = m.sw*decay + 1
	m.sb = m.sb*decay + x
	m.st = m.st*decay + t
	m.sbb = m.sbb*decay + x*x
	m.sbt = m.sbt*decay + x*t
}

// noteArrival records a request's arrival.
func (m *costModel) noteArrival(now time.Time) {
	if !m.lastArrival.IsZero() {
		g := now.Sub(m.lastArrival).Seconds()
		if m.gap == 0 {
			m.gap = g
		} else {
			m.gap = 0.95*m.gap + 0.05*g
		}
	}
	m.lastArrival = now
}

// fixedCost is the fitted cost of a run apart from its rows; ok is false
// until the runs seen differ enough in size to tell fixed from per-row
// cost.
func (m *costModel) fixedCost() (seconds float64, ok bool) {
	if m.sw < 8 {
		return 0, false
	}
	mean := m.sb / m.sw
	variance := m.sbb/m.sw - mean*mean
	if variance < 1 { // batch sizes within about one row of each other
		return 0, false
	}
	slope := (m.sbt/m.sw - mean*m.st/m.sw) / variance
	return m.st/m.sw - slope*mean, true
}

// waitPays reports whether waiting for more requests can raise the
// throughput of a batch of n. It is true when the model is not known yet,
// so the scheduler's earlier rule decides then.
func (m *costModel) waitPays(n int) bool {
	fixed, ok := m.fixedCost()
	if !ok || m.gap <= 0 {
		return true
	}
	return fixed/m.gap > float64(n) // λ·fixed > b
}
