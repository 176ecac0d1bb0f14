package treeensemble

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
)

// BenchmarkProcessor runs Decode, Run and Encode on EAS JSON bodies of 1
// and 1000 records for the 30-feature breast cancer model: the processor's
// cost around the trees themselves.
func BenchmarkProcessor(b *testing.B) {
	p := &Processor{}
	const model = "../../examples/models/breast_cancer_xgb.json"
	if err := p.Configure(processors.Spec{Code: "parameter_server", ModelSource: model}); err != nil {
		b.Fatal(err)
	}
	if err := p.Load(b.Context(), processors.Files{ModelPath: model}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 1000} {
		var recs []string
		for i := range n {
			var kv []string
			for j, f := range p.features {
				kv = append(kv, fmt.Sprintf("%q:%s", f, strconv.FormatFloat(float64(i%13)*0.7+float64(j), 'g', -1, 64)))
			}
			recs = append(recs, "{"+strings.Join(kv, ",")+"}")
		}
		body := []byte("[" + strings.Join(recs, ",") + "]")
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				pl, err := p.Decode(b.Context(), &processors.Request{Body: body})
				if err != nil {
					b.Fatal(err)
				}
				res, err := p.Run(b.Context(), []*payload{pl})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Encode(b.Context(), pl, res[0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
