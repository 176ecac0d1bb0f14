package pmml_test

import (
	"fmt"
	"log"

	"github.com/eas-server/eas-server/engines/pmml"
)

// Example scores one record with the hand-written random forest in testdata.
func Example() {
	m, err := pmml.ParseFile("testdata/rf.pmml")
	if err != nil {
		log.Fatal(err)
	}
	rec := m.NewRecord()
	rec.Values[m.InputIndex("temperature")] = pmml.FloatValue(30)
	rec.Values[m.InputIndex("humidity")] = pmml.StringValue("90") // numeric strings are accepted
	rec.Values[m.InputIndex("outlook")] = pmml.StringValue("rain")
	out := []pmml.Result{m.NewResult()}
	if err := m.Score([]pmml.Record{rec}, out); err != nil {
		log.Fatal(err)
	}
	for i, f := range m.Outputs() {
		fmt.Printf("%s = %v\n", f.Name, out[0].Values[i])
	}
	// Output:
	// play = no
	// predicted_play = no
	// p_yes = 0.3333333333333333
	// p_no = 0.6666666666666666
}

// ExampleModel_ScoreMap uses the map convenience with EAS's default filling
// of missing inputs: sex is absent and scored as 0.
func ExampleModel_ScoreMap() {
	m, err := pmml.ParseFile("testdata/lr.pmml", pmml.Options{MissingValueDefaults: true})
	if err != nil {
		log.Fatal(err)
	}
	res, err := m.ScoreMap(map[string]any{"cp": 1, "fbs": 1, "age": 41, "trestbps": 130, "thal": "norm"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ifhealth=%v p_1=%.6f\n", res["ifhealth"], res["p_1"])
	// Output:
	// ifhealth=0 p_1=0.440286
}
