package bench

import (
	"encoding/xml"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/asafschers/goscore"
	"github.com/eas-server/eas-server/engines/pmml"
)

const (
	trees = 100
	depth = 8
)

func ours(t testing.TB, doc string) *pmml.Model {
	t.Helper()
	m, err := pmml.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func records(m *pmml.Model, xs [][]float64) []pmml.Record {
	out := make([]pmml.Record, len(xs))
	for i, x := range xs {
		out[i] = m.NewRecord()
		for j, v := range x {
			out[i].Values[m.InputIndex(fmt.Sprintf("f%d", j))] = pmml.FloatValue(v)
		}
	}
	return out
}

func featureMap(x []float64) map[string]any {
	m := make(map[string]any, len(x))
	for j, v := range x {
		m[fmt.Sprintf("f%d", j)] = v
	}
	return m
}

// TestSameAnswers makes sure the race is fair: on the random forest both
// evaluators return the same vote share for every record.
func TestSameAnswers(t *testing.T) {
	doc := RandomForest(trees, depth, 1)
	m := ours(t, doc)
	var rf goscore.RandomForest
	if err := xml.Unmarshal([]byte(doc), &rf); err != nil {
		t.Fatal(err)
	}
	xs := Inputs(200, 2)
	recs := records(m, xs)
	out := make([]pmml.Result, len(recs))
	for i := range out {
		out[i] = m.NewResult()
	}
	if err := m.Score(recs, out); err != nil {
		t.Fatal(err)
	}
	p1 := m.OutputIndex("p_1")
	for i, x := range xs {
		want, err := rf.Score(featureMap(x), "1")
		if err != nil {
			t.Fatal(err)
		}
		if got := out[i].Values[p1].F; math.Abs(got-want) > 1e-12 {
			t.Fatalf("record %d: p_1 = %v, goscore says %v", i, got, want)
		}
	}
}

func benchOurs(b *testing.B, doc string, batch int) {
	m := ours(b, doc)
	recs := records(m, Inputs(batch, 3))
	out := make([]pmml.Result, batch)
	for i := range out {
		out[i] = m.NewResult()
	}
	allocs := testing.AllocsPerRun(10, func() { _ = m.Score(recs, out) })
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := m.Score(recs, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(allocs/float64(batch), "allocs/record")
}

func benchGoscoreRF(b *testing.B, doc string, batch int) {
	var rf goscore.RandomForest
	if err := xml.Unmarshal([]byte(doc), &rf); err != nil {
		b.Fatal(err)
	}
	xs := Inputs(batch, 3)
	feats := make([]map[string]any, batch)
	for i, x := range xs {
		feats[i] = featureMap(x)
	}
	run := func() {
		for _, f := range feats {
			if _, err := rf.Score(f, "1"); err != nil {
				b.Fatal(err)
			}
		}
	}
	allocs := testing.AllocsPerRun(3, run)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(allocs/float64(batch), "allocs/record")
}

func benchGoscoreLR(b *testing.B, doc string, batch int) {
	lr, err := goscore.NewLogisticRegression([]byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	lr.SetupNumbericPredictorMap()
	xs := Inputs(batch, 3)
	feats := make([]map[string]float64, batch)
	for i, x := range xs {
		feats[i] = map[string]float64{}
		for j, v := range x {
			feats[i][fmt.Sprintf("f%d", j)] = v
		}
	}
	run := func() {
		for _, f := range feats {
			if _, _, err := lr.Score(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	allocs := testing.AllocsPerRun(3, run)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(allocs/float64(batch), "allocs/record")
}

// BenchmarkRandomForest scores a 100-tree, depth-8 forest over 8 features.
func BenchmarkRandomForest(b *testing.B) {
	doc := RandomForest(trees, depth, 1)
	for _, batch := range []int{1, 1000} {
		b.Run(fmt.Sprintf("eas/batch=%d", batch), func(b *testing.B) { benchOurs(b, doc, batch) })
		b.Run(fmt.Sprintf("goscore/batch=%d", batch), func(b *testing.B) { benchGoscoreRF(b, doc, batch) })
	}
}

// BenchmarkLogisticRegression scores a 3-class softmax regression over 8
// features.
func BenchmarkLogisticRegression(b *testing.B) {
	doc := LogisticRegression(1)
	for _, batch := range []int{1, 1000} {
		b.Run(fmt.Sprintf("eas/batch=%d", batch), func(b *testing.B) { benchOurs(b, doc, batch) })
		b.Run(fmt.Sprintf("goscore/batch=%d", batch), func(b *testing.B) { benchGoscoreLR(b, doc, batch) })
	}
}
