package bench

import (
	"fmt"
	"math/rand"
	"strings"
)

// Features is the number of numeric inputs of the generated models.
const Features = 8

// RandomForest writes a deterministic random forest: trees binary trees of
// the given depth over f0..f7 with leaves voting "0" or "1". Node attributes
// are written id first, then score, which is the order goscore needs.
func RandomForest(trees, depth int, seed int64) string {
	rng := rand.New(rand.NewSource(seed))
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?>
<PMML version="4.3" xmlns="http://www.dmg.org/PMML-4_3">
<DataDictionary>
<DataField name="y" optype="categorical" dataType="string"><Value value="0"/><Value value="1"/></DataField>
`)
	for i := 0; i < Features; i++ {
		fmt.Fprintf(&b, "<DataField name=\"f%d\" optype=\"continuous\" dataType=\"double\"/>\n", i)
	}
	b.WriteString(`</DataDictionary>
<MiningModel functionName="classification">
<MiningSchema><MiningField name="y" usageType="predicted"/>`)
	for i := 0; i < Features; i++ {
		fmt.Fprintf(&b, "<MiningField name=\"f%d\"/>", i)
	}
	b.WriteString(`</MiningSchema>
<Output><OutputField name="p_1" optype="continuous" dataType="double" feature="probability" value="1"/></Output>
<Segmentation multipleModelMethod="majorityVote">
`)
	for t := 0; t < trees; t++ {
		fmt.Fprintf(&b, "<Segment id=\"%d\"><True/><TreeModel functionName=\"classification\" splitCharacteristic=\"binarySplit\"><MiningSchema><MiningField name=\"y\" usageType=\"predicted\"/></MiningSchema>\n", t+1)
		id := 0
		var node func(d int, pred string)
		node = func(d int, pred string) {
			id++
			if d == depth {
				fmt.Fprintf(&b, "<Node id=\"%d\" score=\"%d\">%s</Node>\n", id, rng.Intn(2), pred)
				return
			}
			fmt.Fprintf(&b, "<Node id=\"%d\">%s\n", id, pred)
			f := rng.Intn(Features)
			v := fmt.Sprintf("%.3f", rng.Float64())
			node(d+1, fmt.Sprintf("<SimplePredicate field=\"f%d\" operator=\"lessOrEqual\" value=\"%s\"/>", f, v))
			node(d+1, fmt.Sprintf("<SimplePredicate field=\"f%d\" operator=\"greaterThan\" value=\"%s\"/>", f, v))
			b.WriteString("</Node>\n")
		}
		node(0, "<True/>")
		b.WriteString("</TreeModel></Segment>\n")
	}
	b.WriteString("</Segmentation></MiningModel></PMML>\n")
	return b.String()
}

// LogisticRegression writes a multinomial logistic regression over f0..f7
// with three classes and softmax normalisation (the one goscore implements).
func LogisticRegression(seed int64) string {
	rng := rand.New(rand.NewSource(seed))
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?>
<PMML version="4.3" xmlns="http://www.dmg.org/PMML-4_3">
<DataDictionary>
<DataField name="y" optype="categorical" dataType="string"><Value value="a"/><Value value="b"/><Value value="c"/></DataField>
`)
	for i := 0; i < Features; i++ {
		fmt.Fprintf(&b, "<DataField name=\"f%d\" optype=\"continuous\" dataType=\"double\"/>\n", i)
	}
	b.WriteString(`</DataDictionary>
<RegressionModel functionName="classification" normalizationMethod="softmax">
<MiningSchema><MiningField name="y" usageType="target"/>`)
	for i := 0; i < Features; i++ {
		fmt.Fprintf(&b, "<MiningField name=\"f%d\"/>", i)
	}
	b.WriteString("</MiningSchema>\n")
	for _, cat := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "<RegressionTable intercept=\"%.4f\" targetCategory=\"%s\">", rng.NormFloat64(), cat)
		for i := 0; i < Features; i++ {
			fmt.Fprintf(&b, "<NumericPredictor name=\"f%d\" coefficient=\"%.4f\"/>", i, rng.NormFloat64())
		}
		b.WriteString("</RegressionTable>\n")
	}
	b.WriteString("</RegressionModel></PMML>\n")
	return b.String()
}

// Inputs returns n deterministic feature vectors in [0, 1).
func Inputs(n int, seed int64) [][]float64 {
	rng := rand.New(rand.NewSource(seed))
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, Features)
		for j := range out[i] {
			out[i][j] = rng.Float64()
		}
	}
	return out
}
