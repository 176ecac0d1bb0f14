package triton

import (
	"sync"
	"time"
)

// stats are the counters of Triton's statistics extension for one model
// version. Counts and nanoseconds only grow; it is safe for concurrent use.
type stats struct {
	mu             sync.Mutex
	last           time.Time
	inferenceCount int64 // inferences: batch rows of the successful requests
	executionCount int64 // runs of the model (one per scheduled batch)
	success, fail  duration
	queue          duration
	computeInfer   duration
	batches        map[int]*duration // compute per executed batch size
}

type duration struct {
	Count int64 `json:"count"`
	NS    int64 `json:"ns"`
}

func (d *duration) add(t time.Duration) {
	d.Count++
	d.NS += t.Nanoseconds()
}

func newStats() *stats { return &stats{batches: map[int]*duration{}} }

// execution records one run of the model holding size batch rows.
func (s *stats) execution(size int, compute time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.executionCount++
	s.computeInfer.add(compute)
	b := s.batches[size]
	if b == nil {
		b = &duration{}
		s.batches[size] = b
	}
	b.add(compute)
}

// queued is the scheduler's QueueWait observer.
func (s *stats) queued(wait time.Duration) {
	s.mu.Lock()
	s.queue.add(wait)
	s.mu.Unlock()
}

// done records the outcome of one request, rows its batch rows.
func (s *stats) done(ok bool, rows int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.success.add(d)
		s.inferenceCount += rows
		s.last = time.Now()
	} else {
		s.fail.add(d)
	}
}

// ModelStats is one entry of GET /v2/models/<m>/stats, in the shape of
// Triton's statistics extension.
type ModelStats struct {
	Name           string         `json:"name"`
	Version        string         `json:"version"`
	LastInference  int64          `json:"last_inference"` // ms since the epoch; 0 = never
	InferenceCount int64          `json:"inference_count"`
	ExecutionCount int64          `json:"execution_count"`
	InferenceStats InferenceStats `json:"inference_stats"`
	BatchStats     []BatchStats   `json:"batch_stats"`
}

// InferenceStats are the cumulative request and phase durations.
type InferenceStats struct {
	Success       duration `json:"success"`
	Fail          duration `json:"fail"`
	Queue         duration `json:"queue"`
	ComputeInput  duration `json:"compute_input"`
	ComputeInfer  duration `json:"compute_infer"`
	ComputeOutput duration `json:"compute_output"`
}

// BatchStats is the compute time of the runs of one batch size.
type BatchStats struct {
	BatchSize    int      `json:"batch_size"`
	ComputeInfer duration `json:"compute_infer"`
}

func (s *stats) snapshot(name, version string) ModelStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ModelStats{
		Name: name, Version: version,
		InferenceCount: s.inferenceCount, ExecutionCount: s.executionCount,
		InferenceStats: InferenceStats{Success: s.success, Fail: s.fail, Queue: s.queue, ComputeInfer: s.computeInfer},
		BatchStats:     []BatchStats{},
	}
	if !s.last.IsZero() {
		out.LastInference = s.last.UnixMilli()
	}
	for size := 1; len(out.BatchStats) < len(s.batches); size++ {
		if b, ok := s.batches[size]; ok {
			out.BatchStats = append(out.BatchStats, BatchStats{BatchSize: size, ComputeInfer: *b})
		}
	}
	return out
}
