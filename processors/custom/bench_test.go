package custom_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom"
)

// BenchmarkCall is one request through a worker process and back, without
// HTTP or the scheduler: the cost a custom processor adds to a request.
func BenchmarkCall(b *testing.B) {
	for _, kind := range []string{"cpp", "python"} {
		b.Run(kind, func(b *testing.B) {
			var path string
			if kind == "cpp" {
				path = buildLibTB(b, "upper")
			} else {
				path, _ = filepath.Abs("testdata/state.py")
			}
			e, err := custom.New(kind)
			if err != nil {
				b.Fatal(err)
			}
			p := e.Processor()
			spec := processors.Spec{Service: "bench", ProcessorType: kind, WorkerThreads: 8, Logger: slog.New(slog.DiscardHandler)}
			if err := p.Configure(spec); err != nil {
				b.Fatal(err)
			}
			if err := p.Load(context.Background(), processors.Files{ProcessorPath: path}); err != nil {
				b.Fatal(err)
			}
			defer p.(processors.Closer).Close()
			body := []byte(`[{"x":1}]`)
			b.Run("serial", func(b *testing.B) {
				for b.Loop() {
					p, _ := e.Decode(context.Background(), &processors.Request{Body: body})
					if _, err := e.Run(context.Background(), []any{p}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, _ := e.Decode(context.Background(), &processors.Request{Body: body})
					if _, err := e.Run(context.Background(), []any{p}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
