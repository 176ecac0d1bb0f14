package trees

import (
	"strings"
	"sync"
	"testing"
)

func TestDimensionErrors(t *testing.T) {
	m, err := Load("testdata/xgboost/multiclass.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Scores(make([]float64, 3), make([]float64, 5)); err == nil || !strings.Contains(err.Error(), "5 values is not a whole number of rows of 4 features") {
		t.Errorf("ragged rows: %v", err)
	}
	if err := m.Scores(make([]float64, 5), make([]float64, 8)); err == nil || !strings.Contains(err.Error(), "output has 5 values, 2 records need 6") {
		t.Errorf("short output: %v", err)
	}
	if err := m.Scores(nil, nil); err != nil {
		t.Errorf("no records: %v", err)
	}
}

// TestConcurrentScoring scores from many goroutines at once (run with
// -race) and checks every answer equals the sequential one, across block
// boundaries and both input precisions.
func TestConcurrentScoring(t *testing.T) {
	for _, file := range []string{"testdata/xgboost/multiclass.ubj", "testdata/lightgbm/handmade_v4.txt"} {
		m, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		const n = 150
		rows := make([]float64, n*m.NumFeatures)
		rows32 := make([]float32, len(rows))
		for i := range rows {
			rows[i] = float64(i%17) * 0.37
			rows32[i] = float32(rows[i])
		}
		want := make([]float64, n*m.NumGroups())
		if err := m.Scores(want, rows); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]float64, len(want))
				var err error
				if g%2 == 0 {
					err = m.Scores(got, rows)
				} else {
					err = m.ScoresFloat32(got, rows32)
				}
				if err != nil {
					t.Error(err)
					return
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("%s goroutine %d value %d: %v, sequential %v", file, g, i, got[i], want[i])
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
