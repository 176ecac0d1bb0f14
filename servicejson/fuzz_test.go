package servicejson

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, and its
// answer must be consistent: an error is a non-empty *Errors and no Service;
// a Service satisfies the rules Parse promises, and parsing its Raw bytes
// again gives the same Service.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"name":"m","processor":"pmml","metadata.instance":"1","labels.a.b":1,"cloud.x.y":null}`))
	f.Add([]byte(`{"name":"m","processor":"pmml","metadata":{"instance":1,"rpc":{"rpc":{}}}}`))
	f.Add([]byte(`{"name":"m","processor":"pmml","autoscaler":{"min":2,"max":8,"scaleStrategies":[{"metricName":"qps","threshold":10},{"metricName":"cpu","threshold":80}],` +
		`"behavior":{"scaleUp":{"stabilizationWindowSeconds":0},"scaleDown":{"stabilizationWindowSeconds":300}}},"metadata":{"instance":2}}`))
	f.Add([]byte(`{"name":"m","processor":"pmml","autoscaler":{"min":"1","max":3,"strategies":{"QPS":"0.5"},"scaleStrategies":[{"metricName":" cpu","threshold":"100","x":null}]},` +
		`"autoscaler.behavior.scaleDown.stabilizationWindowSeconds":3600,"metadata":{"instance":3}}`))
	f.Add([]byte(`{"name":"m","processor":"pmml","autoscaler":{"min":1,"max":3,"strategies":{"qps":10,"gpu":1},"scaleStrategies":[{"metricName":"qps","threshold":1},{},[],` +
		`{"metricname":"cpu","threshold":101,"threshold":2}],"behavior":{"onZero":{},"scaleUp":{"stabilizationWindowSeconds":-1}}},"metadata":{"instance":5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if s != nil {
				t.Fatal("Parse returned a Service and an error")
			}
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.Problems) == 0 {
				t.Fatalf("error %T %v is not a non-empty *Errors", err, err)
			}
			for _, p := range errs.Problems {
				if p.Msg == "" {
					t.Fatalf("empty message in %v", err)
				}
			}
			return
		}
		if !nameRule.MatchString(s.Name) || len(s.Name) > maxNameLen {
			t.Fatalf("accepted name %q", s.Name)
		}
		m, r := s.Metadata, s.Metadata.RPC
		if m.Instance < 1 || m.Instance > 1000 || r.MaxBatchSize < 1 || r.MaxBatchSize > 1024 ||
			r.Keepalive <= 0 || r.WorkerThreads < 1 || r.MaxQueueSize < 1 || r.RateLimit < 0 || m.GPU < 0 {
			t.Fatalf("accepted out-of-range metadata %+v", m)
		}
		if s.ProcessorPath == "" && s.Code.Raw != s.Processor {
			t.Fatalf("code %+v does not match processor %q", s.Code, s.Processor)
		}
		if s.Code.IsGPU() && !s.UsesGPU() {
			t.Fatalf("accepted GPU code %s without a GPU", s.Processor)
		}
		if s.Code.IsCPU() && (m.GPU > 0 || m.GPUMemory > 0) {
			t.Fatalf("accepted CPU code %s with a GPU", s.Processor)
		}
		for _, n := range r.PreferredBatchSizes {
			if n > r.MaxBatchSize {
				t.Fatalf("preferred batch size %d above max %d", n, r.MaxBatchSize)
			}
		}
		if r.Batcher == "bucket" && len(r.Buckets) == 0 {
			t.Fatal("bucket batcher without buckets")
		}
		if a := s.Autoscaler; a != nil {
			if a.Min < 1 || a.Min > a.Max || a.Max > 1000 || m.Instance < a.Min || m.Instance > a.Max {
				t.Fatalf("accepted autoscaler min %d max %d with instance %d", a.Min, a.Max, m.Instance)
			}
			for i, st := range a.Strategies {
				ok := st.Metric == MetricQPS && st.Threshold > 0 && st.Threshold <= 1e6 ||
					st.Metric == MetricCPU && st.Threshold >= 1 && st.Threshold <= 100 && st.Threshold == float64(int(st.Threshold))
				if !ok || i > 0 && st.Metric <= a.Strategies[i-1].Metric {
					t.Fatalf("accepted strategies %+v", a.Strategies)
				}
			}
			for _, w := range []*time.Duration{a.ScaleUpWindow, a.ScaleDownWindow} {
				if w != nil && (*w < 0 || *w > time.Hour || *w%time.Second != 0) {
					t.Fatalf("accepted stabilization window %v", *w)
				}
			}
		}
		again, err := Parse(s.Raw)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("Parse is not deterministic: %v\n%+v\n%+v", err, again, s)
		}
	})
}
