package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/eas-server/eas-server/processors"
)

// InProcessResult is the outcome of RunInProcess.
type InProcessResult struct {
	Batch   int     `json:"batch"`
	Runs    int     `json:"runs"`
	Seconds float64 `json:"seconds"`
	RowsPS  float64 `json:"rows_per_second"`
	MeanMs  float64 `json:"mean_run_ms"`
}

// RunInProcess calls the processor's Run on the payload made from tp back to
// back for d, with no HTTP, codec or scheduler in the path: the ceiling the
// server is measured against. rows is the number of rows tp carries.
func RunInProcess(ctx context.Context, e *processors.Engine, tp *processors.TensorPayload, rows int, d, warmup time.Duration) (InProcessResult, error) {
	if !e.ServesTensors() {
		return InProcessResult{}, fmt.Errorf("the processor does not take tensors")
	}
	payload, err := e.FromTensors(ctx, tp)
	if err != nil {
		return InProcessResult{}, err
	}
	batch := []any{payload}
	proc := e
	for end := time.Now().Add(warmup); time.Now().Before(end); {
		if _, err := proc.Run(ctx, batch); err != nil {
			return InProcessResult{}, fmt.Errorf("warm-up run: %w", err)
		}
	}
	start := time.Now()
	runs := 0
	for time.Since(start) < d {
		if _, err := proc.Run(ctx, batch); err != nil {
			return InProcessResult{}, err
		}
		runs++
	}
	el := time.Since(start).Seconds()
	return InProcessResult{Batch: rows, Runs: runs, Seconds: el, RowsPS: float64(runs*rows) / el, MeanMs: el * 1000 / float64(runs)}, nil
}
