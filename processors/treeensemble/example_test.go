package treeensemble_test

import (
	"encoding/json"
	"os"
	"testing"
)

// TestExample deploys examples/service-json/xgboost_breast_cancer.json
// as it is (model path made relative to this package) and checks the
// PS-shaped answer the README shows.
func TestExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/service-json/xgboost_breast_cancer.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec["processor"] != "parameter_server" {
		t.Fatalf("the example deploys %v, want parameter_server", spec["processor"])
	}
	spec["model_path"] = "../../" + spec["model_path"].(string)
	spec["token"] = "T"
	js, _ := json.Marshal(spec)
	base := serve(t, string(js))
	code, out := call(t, "POST", base+"/api/predict/xgboost_breast_cancer",
		`[{"mean_radius": 17.99, "mean_texture": 10.38, "mean_perimeter": 122.8, "mean_area": 1001.0, "mean_smoothness": 0.1184,
		   "mean_compactness": 0.2776, "mean_concavity": 0.3001, "mean_concave_points": 0.1471, "mean_symmetry": 0.2419,
		   "mean_fractal_dimension": 0.07871, "radius_error": 1.095, "texture_error": 0.9053, "perimeter_error": 8.589,
		   "area_error": 153.4, "smoothness_error": 0.006399, "compactness_error": 0.04904, "concavity_error": 0.05373,
		   "concave_points_error": 0.01587, "symmetry_error": 0.03003, "fractal_dimension_error": 0.006193, "worst_radius": 25.38,
		   "worst_texture": 17.33, "worst_perimeter": 184.6, "worst_area": 2019.0, "worst_smoothness": 0.1622,
		   "worst_compactness": 0.6656, "worst_concavity": 0.7119, "worst_concave_points": 0.2654, "worst_symmetry": 0.4601,
		   "worst_fractal_dimension": 0.1189},
		  {"mean_radius": 12.0, "worst_radius": 13.0, "worst_concave_points": 0.05}]`)
	if code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	var as []struct {
		Label   string
		Score   float64
		Details []map[string]float64
	}
	if err := json.Unmarshal([]byte(out), &as); err != nil || len(as) != 2 {
		t.Fatalf("%s: %v", out, err)
	}
	if as[0].Label != "malignant" || as[1].Label != "benign" {
		t.Errorf("labels %q, %q; want malignant (large, many concave points), benign (small): %s", as[0].Label, as[1].Label, out)
	}
	for _, a := range as {
		p0, p1 := a.Details[0]["malignant"], a.Details[1]["benign"]
		if float32(p0)+float32(p1) < 0.9999 || float32(p0)+float32(p1) > 1.0001 {
			t.Errorf("details %v do not sum to 1", a.Details)
		}
	}
}
