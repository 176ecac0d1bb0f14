package bench

import (
	"bufio"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dmitryikh/leaves"

	"github.com/eas-server/eas-server/engines/trees"
)

// benchDir holds the benchmark model written by
// /usr/bin/python3 scripts/gen-tree-models.py --bench DIR
// (not committed: 200 trees of depth 10 are tens of megabytes).
func benchDir(tb testing.TB) string {
	dir := os.Getenv("TREES_BENCH_DIR")
	if dir == "" {
		dir = "/tmp/treesbench"
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.json")); err != nil {
		tb.Skipf("no benchmark model in %s; run /usr/bin/python3 scripts/gen-tree-models.py --bench %s (or set TREES_BENCH_DIR)", dir, dir)
	}
	return dir
}

// leavesModel writes a copy of bench.bin that leaves can read: leaves
// knows the binary format of XGBoost before 1.0, so the copy drops the
// "binf" prefix XGBoost 1.x writes and fills the GBTreeModelParam fields
// XGBoost 1.x leaves at zero (num_feature, num_output_group).
func leavesModel(tb testing.TB, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "bench.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	if string(b[:4]) == "binf" {
		b = b[4:]
	}
	numFeature := binary.LittleEndian.Uint32(b[4:])
	off := 136
	for range 2 { // objective and booster names
		off += 8 + int(binary.LittleEndian.Uint64(b[off:]))
	}
	binary.LittleEndian.PutUint32(b[off+8:], numFeature)
	binary.LittleEndian.PutUint32(b[off+24:], 1)
	out := filepath.Join(tb.TempDir(), "bench_leaves.bin")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return out
}

func readRows(tb testing.TB, path string) ([]float64, int) {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var vals []float64
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		for _, s := range fields {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				tb.Fatal(err)
			}
			vals = append(vals, v)
		}
		n++
	}
	return vals, n
}

// TestBenchModelExact checks the deep benchmark model against XGBoost's
// own predictions bit for bit, and reports how far leaves is from them.
func TestBenchModelExact(t *testing.T) {
	dir := benchDir(t)
	m, err := trees.Load(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	rows, n := readRows(t, filepath.Join(dir, "bench_rows.tsv"))
	want, _ := readRows(t, filepath.Join(dir, "bench_pred.txt"))
	got := make([]float64, n)
	if err := m.Predict(got, rows); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if float32(got[i]) != float32(want[i]) {
			t.Fatalf("record %d: %v, xgboost %v", i, got[i], want[i])
		}
	}
	lv, err := leaves.XGEnsembleFromFile(leavesModel(t, dir), true)
	if err != nil {
		t.Logf("leaves cannot read the model: %v", err)
		return
	}
	lp := make([]float64, n)
	if err := lv.PredictDense(rows, n, m.NumFeatures, lp, 0, 1); err != nil {
		t.Fatal(err)
	}
	worst, differ := 0.0, 0
	for i := range want {
		d := math.Abs(lp[i] - want[i])
		worst = max(worst, d)
		if float32(lp[i]) != float32(want[i]) {
			differ++
		}
	}
	t.Logf("leaves: %d of %d predictions differ from xgboost's float32 result, by up to %.3g", differ, n, worst)
}

func BenchmarkTrees(b *testing.B) {
	dir := benchDir(b)
	m, err := trees.Load(filepath.Join(dir, "bench.json"))
	if err != nil {
		b.Fatal(err)
	}
	rows, n := readRows(b, filepath.Join(dir, "bench_rows.tsv"))
	F := m.NumFeatures
	for _, batch := range []int{1, 1000} {
		b.Run("records="+strconv.Itoa(batch), func(b *testing.B) {
			out := make([]float64, batch)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				start := (i * batch) % n
				if start+batch > n {
					start = 0
				}
				if err := m.Predict(out, rows[start*F:(start+batch)*F]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkLeaves(b *testing.B) {
	dir := benchDir(b)
	lv, err := leaves.XGEnsembleFromFile(leavesModel(b, dir), true)
	if err != nil {
		b.Skipf("leaves cannot read the model: %v", err)
	}
	rows, n := readRows(b, filepath.Join(dir, "bench_rows.tsv"))
	F := lv.NFeatures()
	for _, batch := range []int{1, 1000} {
		b.Run("records="+strconv.Itoa(batch), func(b *testing.B) {
			out := make([]float64, batch)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				start := (i * batch) % n
				if start+batch > n {
					start = 0
				}
				var err error
				if batch == 1 {
					err = lv.Predict(rows[start*F:(start+1)*F], 0, out)
				} else {
					err = lv.PredictDense(rows[start*F:(start+batch)*F], batch, F, out, 0, 1)
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
