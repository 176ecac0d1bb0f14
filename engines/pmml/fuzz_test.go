package pmml

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary documents to the parser; a document that loads
// must also score records of missing and odd values without panicking.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.pmml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`<PMML version="4.4"><DataDictionary><DataField name="x" optype="continuous" dataType="double"/></DataDictionary><TreeModel functionName="regression" missingValueStrategy="weightedConfidence"><MiningSchema><MiningField name="x"/></MiningSchema><Node score="1"><True/><Node score="2" recordCount="3"><SimplePredicate field="x" operator="lessThan" value="1"/></Node></Node></TreeModel></PMML>`))
	f.Add([]byte(`<PMML><DataDictionary><DataField name="x" optype="categorical" dataType="string"/></DataDictionary><MiningModel functionName="classification"><MiningSchema><MiningField name="x"/></MiningSchema><Segmentation multipleModelMethod="modelChain"></Segmentation></MiningModel></PMML>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := Parse(bytes.NewReader(doc))
		if err != nil {
			return
		}
		recs := []Record{m.NewRecord(), m.NewRecord(), m.NewRecord()}
		for i := range m.Inputs() {
			recs[1].Values[i] = FloatValue(0)
			recs[2].Values[i] = StringValue("x")
		}
		out := []Result{m.NewResult(), m.NewResult(), m.NewResult()}
		if err := m.Score(recs, out); err != nil {
			t.Fatalf("score: %v", err)
		}
		for _, r := range out {
			if len(r.Values) != len(m.Outputs()) {
				t.Fatalf("%d values for %d outputs", len(r.Values), len(m.Outputs()))
			}
		}
	})
}

// FuzzScore scores random records with the test models and checks the
// invariants every answer must keep.
func FuzzScore(f *testing.F) {
	models := []*Model{
		mustParse(f, "testdata/rf.pmml"),
		mustParse(f, "testdata/lr.pmml"),
		mustParse(f, "testdata/functions.pmml"),
		mustParse(f, "testdata/lr.pmml", Options{MissingValueDefaults: true}),
	}
	f.Add(20.0, 60.0, "sunny", uint8(0))
	f.Add(math.NaN(), math.Inf(1), "", uint8(0xff))
	f.Add(-1e308, 5e-324, "rain", uint8(0x0f))
	f.Fuzz(func(t *testing.T, a, b float64, s string, mask uint8) {
		for _, m := range models {
			r := m.NewRecord()
			for i, fl := range m.Inputs() {
				bit := mask >> (uint(i) % 8) & 1
				switch {
				case bit == 1:
					// leave missing
				case fl.OpType != Continuous:
					if len(fl.Values) > 0 && len(s) > 0 {
						r.Values[i] = StringValue(fl.Values[int(s[0])%len(fl.Values)])
					} else {
						r.Values[i] = StringValue(s)
					}
				case i%2 == 0:
					r.Values[i] = FloatValue(a)
				default:
					r.Values[i] = FloatValue(b)
				}
			}
			out := []Result{m.NewResult()}
			if err := m.Score([]Record{r}, out); err != nil {
				t.Fatal(err)
			}
			if out[0].Err != nil {
				continue
			}
			for j, fl := range m.Outputs() {
				v := out[0].Values[j]
				if fl.Feature == "probability" && v.K == Float && !(v.F >= 0 && v.F <= 1) && !math.IsNaN(v.F) {
					t.Fatalf("%s = %v is not a probability", fl.Name, v.F)
				}
			}
		}
	})
}
