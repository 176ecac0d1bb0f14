package llm

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/processors"
)

// BenchmarkPrefillLogits measures a 256-token prompt chunk with the logits
// computed at the last token only (the default) and at every position (the
// graph as exported), on a model directory named by $EAS_BENCH_LLM_DIR
// (make bench-generation's exports, e.g.
// ~/.cache/eas-server/bench-llm/<key>/gpt2/optimum); it skips without one.
func BenchmarkPrefillLogits(b *testing.B) {
	dir := os.Getenv("EAS_BENCH_LLM_DIR")
	if dir == "" {
		b.Skip("set EAS_BENCH_LLM_DIR to a model export (make bench-generation makes them)")
	}
	prompt := make([]int32, 256)
	for i := range prompt {
		prompt[i] = int32(100 + i*37%40000)
	}
	for _, c := range []struct {
		name string
		all  bool
	}{{"last-token", false}, {"every-position", true}} {
		b.Run(filepath.Base(filepath.Dir(dir))+"/"+c.name, func(b *testing.B) {
			m, err := Open(b.Context(), dir, Options{Threads: 2, AllPositions: c.all})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if m.lay.lastOnly == c.all {
				b.Fatalf("lastOnly %v with AllPositions %v", m.lay.lastOnly, c.all)
			}
			cpu0 := cpuTime()
			for b.Loop() {
				s := m.NewSequence()
				if _, err := m.Step(b.Context(), []processors.StepInput{{Seq: s, Tokens: prompt}}); err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
			// CPU time is the work done, whatever else the host runs.
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
