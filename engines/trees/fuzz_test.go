package trees

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// addSeeds adds the files matching pattern as seeds.
func addSeeds(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
}

// exercise scores a few rows on a model that loaded: a corrupt model must
// either fail to load or score without panicking or looping.
func exercise(t *testing.T, m *Model) {
	if m.NumFeatures > 4096 {
		return
	}
	rows := make([]float64, 3*m.NumFeatures)
	for i := range rows {
		switch i % 4 {
		case 0:
			rows[i] = math.NaN()
		case 1:
			rows[i] = float64(i % 7)
		case 2:
			rows[i] = -1.5
		default:
			rows[i] = 1e30
		}
	}
	out := make([]float64, 3*m.NumGroups())
	if err := m.Margins(out, rows); err != nil {
		t.Fatalf("margins on a loaded model: %v", err)
	}
	if err := m.Scores(out, rows); err != nil {
		t.Fatalf("scores on a loaded model: %v", err)
	}
	rows32 := make([]float32, len(rows))
	for i, v := range rows {
		rows32[i] = float32(v)
	}
	if err := m.PredictFloat32(make([]float64, 3*m.PredictWidth()), rows32); err != nil {
		t.Fatalf("predict on a loaded model: %v", err)
	}
}

func FuzzXGBoostJSON(f *testing.F) {
	addSeeds(f, "testdata/xgboost/multiclass_softmax.json", "testdata/xgboost/gblinear.json", "testdata/xgboost/categorical.json", "testdata/xgboost/dart.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseXGBoostJSON(data); err == nil {
			exercise(t, m)
		}
	})
}

func FuzzUBJSON(f *testing.F) {
	addSeeds(f, "testdata/xgboost/multiclass_softmax.ubj", "testdata/xgboost/gblinear.ubj", "testdata/xgboost/categorical.ubj")
	f.Add([]byte("{i\x01a[$d#i\x01\x3f\x80\x00\x00}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseXGBoostUBJSON(data); err == nil {
			exercise(t, m)
		}
	})
}

func FuzzXGBoostBinary(f *testing.F) {
	addSeeds(f, "testdata/xgboost/multiclass_softmax.bin", "testdata/xgboost/gblinear.bin", "testdata/xgboost/dart.bin")
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseXGBoostBinary(data); err == nil {
			exercise(t, m)
		}
	})
}

func FuzzLightGBM(f *testing.F) {
	addSeeds(f, "testdata/lightgbm/*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseLightGBM(data); err == nil {
			exercise(t, m)
		}
	})
}

func FuzzLightGBMJSON(f *testing.F) {
	addSeeds(f, "testdata/lightgbm/*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := ParseLightGBMJSON(data); err == nil {
			exercise(t, m)
		}
	})
}

// FuzzParse runs the format detection over anything.
func FuzzParse(f *testing.F) {
	addSeeds(f, "testdata/lightgbm/*", "testdata/xgboost/gblinear.*")
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := Parse(data); err == nil {
			exercise(t, m)
		}
	})
}
