package pmml

import (
	"path/filepath"
	"testing"
)

// BenchmarkCorpus scores the input rows of real exported models from the
// shared conformance corpus (skipped when it is absent), one Score call per
// 150-200 records.
func BenchmarkCorpus(b *testing.B) {
	dir := conformanceDir(b)
	for _, name := range []string{
		"knime-DecisionTreeEnsembleAudit", "rattle-RandomForestAudit", "sklearn2pmml-LightGBMAudit",
		"sklearn2pmml-XGBoostAuto", "sklearn2pmml-RandomForestIris", "rattle-NeuralNetworkAudit",
		"rattle-KernlabSVMAudit", "sklearn2pmml-LogisticRegressionAudit",
	} {
		m, err := ParseFile(filepath.Join(dir, name, "model.pmml"))
		if err != nil {
			b.Fatal(err)
		}
		in, err := readCSV(filepath.Join(dir, name, "input.csv"))
		if err != nil {
			b.Fatal(err)
		}
		recs := make([]Record, 0, len(in)-1)
		for _, row := range in[1:] {
			r := m.NewRecord()
			for i, h := range in[0] {
				if k := m.InputIndex(h); k >= 0 && row[i] != "" {
					r.Values[k] = StringValue(row[i])
				}
			}
			recs = append(recs, r)
		}
		out := make([]Result, len(recs))
		for i := range out {
			out[i] = m.NewResult()
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := m.Score(recs, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
		})
	}
}
