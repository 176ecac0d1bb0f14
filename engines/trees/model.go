// Package trees loads XGBoost and LightGBM tree ensembles (and XGBoost
// linear boosters) into one compiled form and scores them with the
// libraries' own arithmetic.
//
// Readers: XGBoost JSON, UBJSON and the legacy binary format (gbtree, dart,
// gblinear); LightGBM text models (version v2, v3 and v4) and LightGBM's
// JSON dump (gbdt, dart, rf). Whatever the source, a model becomes flat
// node and leaf arrays with features resolved to column indexes, so
// scoring allocates nothing per record.
//
// Exactness is the point: XGBoost casts inputs to float32, adds leaves in
// float32 in tree order starting from the margin of base_score, and
// transforms with glibc's expf; an XGBoost model here does the same and
// its numbers are bit-identical to XGBoost's CPU predictor. LightGBM
// computes in double and so does a LightGBM model here.
//
// A Model is immutable after loading and safe for concurrent use.
package trees

import (
	"fmt"
	"math"
	"sync"
)

// Kind is what a model predicts, which decides how its outputs read.
type Kind uint8

// The kinds of model.
const (
	Regression Kind = iota // one value per record
	Binary                 // one probability of class 1 per record
	Multiclass             // one probability per class per record
	Ranking                // one relevance margin per record
)

func (k Kind) String() string {
	switch k {
	case Binary:
		return "binary"
	case Multiclass:
		return "multiclass"
	case Ranking:
		return "ranking"
	}
	return "regression"
}

// transform is an objective's link from margin to prediction.
type transform uint8

const (
	tIdentity transform = iota
	tSigmoid            // XGBoost: float32 1/(1+expf(-x)); LightGBM: 1/(1+exp(-sigmoid*x))
	tExp
	tSoftmax
	tSoftmaxClass // XGBoost multi:softmax: predict returns the class index
	tOVA          // LightGBM multiclassova: a sigmoid per class
	tLog1pExp     // LightGBM cross_entropy_lambda
	tSignSquare   // LightGBM regression with sqrt: sign(x)*x^2
	tHinge        // XGBoost binary:hinge: 1 when the margin is positive, else 0
)

// Model is a loaded ensemble. Its exported fields describe it; they are
// read-only after loading.
type Model struct {
	Library      string   // "xgboost" or "lightgbm"
	Format       string   // "xgboost-json", "xgboost-ubjson", "xgboost-binary", "lightgbm-text", "lightgbm-json"
	Booster      string   // gbtree, dart, gblinear, gbdt, rf
	Objective    string   // the library's objective name, e.g. "binary:logistic", "multiclass"
	Kind         Kind     // how outputs read
	NumFeatures  int      // columns a row has
	FeatureNames []string // one per column when the model names them, else nil
	NumClass     int      // classes of a classifier (2 for binary); 0 otherwise
	NumTrees     int      // trees (0 for gblinear)

	groups    int // margins per row
	transform transform
	sigmoid   float64 // LightGBM binary/ova scale

	e32     *ensemble[float32, int32]
	base32  float32   // XGBoost margin of base_score
	linear  []float32 // XGBoost gblinear weights: feature-major, groups wide, then the biases
	e64     *ensemble[float64, int64]
	average float64 // LightGBM rf: the margins are divided by this (iterations); 0 = no averaging

	pool sync.Pool // *scratch, one block's working memory
}

// NumGroups is the number of margins per record: the classes of a
// multiclass model, else 1.
func (m *Model) NumGroups() int { return m.groups }

// Float32 reports whether the model computes in float32 (XGBoost); its
// outputs then convert to float32 without loss and print shortest as float32.
func (m *Model) Float32() bool { return m.e32 != nil || m.linear != nil }

// PredictWidth is the number of values Predict writes per record: NumGroups,
// except 1 for XGBoost's multi:softmax, which predicts the class index.
func (m *Model) PredictWidth() int {
	if m.transform == tSoftmaxClass {
		return 1
	}
	return m.groups
}

func (m *Model) checkDims(dst []float64, nrows, width int) error {
	if len(dst) < nrows*width {
		return fmt.Errorf("trees: output has %d values, %d records need %d", len(dst), nrows, nrows*width)
	}
	return nil
}

// rowsOf returns how many rows a flat slice of n values holds.
func (m *Model) rowsOf(n int) (int, error) {
	if m.NumFeatures == 0 || n%m.NumFeatures != 0 {
		return 0, fmt.Errorf("trees: %d values is not a whole number of rows of %d features", n, m.NumFeatures)
	}
	return n / m.NumFeatures, nil
}

// Margins writes the raw margins (before the objective's link) of the
// records in rows, row-major with NumFeatures values each (NaN = missing),
// into dst, NumGroups values per record.
func (m *Model) Margins(dst, rows []float64) error {
	return m.run(dst, rows, nil, outMargin)
}

// Scores writes the model's probabilities or values: per record, the
// probability of class 1 (binary), one probability per class (multiclass,
// also for multi:softmax), the value (regression) or the margin (ranking).
func (m *Model) Scores(dst, rows []float64) error {
	return m.run(dst, rows, nil, outScore)
}

// Predict writes what the library's own predict returns: Scores, except the
// class index for XGBoost's multi:softmax (PredictWidth values per record).
func (m *Model) Predict(dst, rows []float64) error {
	return m.run(dst, rows, nil, outPredict)
}

// MarginsFloat32, ScoresFloat32 and PredictFloat32 take float32 rows; an
// XGBoost model uses them without conversion.
func (m *Model) MarginsFloat32(dst []float64, rows []float32) error {
	return m.run(dst, nil, rows, outMargin)
}

// ScoresFloat32 is Scores on float32 rows.
func (m *Model) ScoresFloat32(dst []float64, rows []float32) error {
	return m.run(dst, nil, rows, outScore)
}

// PredictFloat32 is Predict on float32 rows.
func (m *Model) PredictFloat32(dst []float64, rows []float32) error {
	return m.run(dst, nil, rows, outPredict)
}

type outKind uint8

const (
	outMargin outKind = iota
	outScore
	outPredict
)

// block is how many rows are scored together: every tree is walked for the
// whole block before the next tree, as XGBoost's CPU predictor does, so
// the tree stays in cache while each row still sums in tree order.
const block = 64

func (m *Model) run(dst, rows64 []float64, rows32 []float32, kind outKind) error {
	n := len(rows64)
	if rows32 != nil {
		n = len(rows32)
	}
	nrows, err := m.rowsOf(n)
	if err != nil {
		return err
	}
	width := m.groups
	if kind == outPredict {
		width = m.PredictWidth()
	}
	if err := m.checkDims(dst, nrows, width); err != nil {
		return err
	}
	if m.e64 != nil {
		return m.run64(dst, rows64, rows32, nrows, kind)
	}
	return m.run32(dst, rows64, rows32, nrows, kind)
}

// blockRows is how many rows of F features a block takes: wide rows
// shrink it so the block's keys stay small.
func blockRows(F int) int {
	if F > 1024 {
		return max(1, 64*1024/F)
	}
	return block
}

// scratch is a block's working memory, pooled per Model.
type scratch struct {
	x32 []float32
	k32 []int32
	k64 []int64
	a32 []float32
}

func (m *Model) getScratch() *scratch {
	if s, ok := m.pool.Get().(*scratch); ok {
		return s
	}
	bs := blockRows(m.NumFeatures)
	n := bs * m.NumFeatures
	s := &scratch{}
	switch {
	case m.linear != nil:
		s.x32, s.a32 = make([]float32, n), make([]float32, bs*m.groups)
	case m.e32 != nil:
		s.k32, s.a32 = make([]int32, n), make([]float32, bs*m.groups)
	default:
		s.k64 = make([]int64, n)
	}
	return s
}

func (m *Model) run32(dst, rows64 []float64, rows32 []float32, nrows int, kind outKind) error {
	F, G := m.NumFeatures, m.groups
	bs := blockRows(F)
	s := m.getScratch()
	defer m.pool.Put(s)
	for start := 0; start < nrows; start += bs {
		nb := min(bs, nrows-start)
		a := s.a32[:nb*G]
		for i := range a {
			a[i] = m.base32
		}
		if m.linear != nil {
			x := s.x32[:nb*F]
			if rows32 != nil {
				copy(x, rows32[start*F:(start+nb)*F])
			} else {
				for i, v := range rows64[start*F : (start+nb)*F] {
					x[i] = float32(v)
				}
			}
			m.linear32(a, x, nb)
		} else {
			x := s.k32[:nb*F]
			if rows32 != nil {
				for i, v := range rows32[start*F : (start+nb)*F] {
					x[i] = toKey[float32, int32](v)
				}
			} else {
				for i, v := range rows64[start*F : (start+nb)*F] {
					x[i] = toKey[float32, int32](float32(v))
				}
			}
			m.e32.addBlock(a, x, nb, F, G)
		}
		m.finish32(dst, a, start, nb, kind)
	}
	return nil
}

// linear32 is XGBoost's gblinear: per group, bias + base, then each present
// feature's x*w added in column order, all in float32.
func (m *Model) linear32(a, x []float32, nb int) {
	F, G := m.NumFeatures, m.groups
	w := m.linear
	for r := 0; r < nb; r++ {
		row := x[r*F : r*F+F]
		for g := 0; g < G; g++ {
			psum := w[F*G+g] + a[r*G+g]
			for j, v := range row {
				if v == v {
					psum += float32(v * w[j*G+g])
				}
			}
			a[r*G+g] = psum
		}
	}
}

func (m *Model) finish32(dst []float64, a []float32, start, nb int, kind outKind) {
	G := m.groups
	if kind == outMargin || m.transform == tIdentity {
		for i, v := range a {
			dst[start*G+i] = float64(v)
		}
		return
	}
	switch m.transform {
	case tSigmoid:
		for i, v := range a {
			dst[start*G+i] = float64(sigmoid32(v))
		}
	case tExp:
		for i, v := range a {
			dst[start*G+i] = float64(expf(v))
		}
	case tHinge:
		for i, v := range a {
			dst[start*G+i] = 0
			if v > 0 {
				dst[start*G+i] = 1
			}
		}
	case tSoftmax, tSoftmaxClass:
		for r := 0; r < nb; r++ {
			p := a[r*G : r*G+G]
			if m.transform == tSoftmaxClass && kind == outPredict {
				best := 0
				for j, v := range p {
					if v > p[best] {
						best = j
					}
				}
				dst[start+r] = float64(best)
				continue
			}
			softmax32(p)
			for j, v := range p {
				dst[(start+r)*G+j] = float64(v)
			}
		}
	}
}

func (m *Model) run64(dst, rows64 []float64, rows32 []float32, nrows int, kind outKind) error {
	F, G := m.NumFeatures, m.groups
	bs := blockRows(F)
	s := m.getScratch()
	defer m.pool.Put(s)
	for start := 0; start < nrows; start += bs {
		nb := min(bs, nrows-start)
		x := s.k64[:nb*F]
		if rows32 != nil {
			for i, v := range rows32[start*F : (start+nb)*F] {
				x[i] = toKey[float64, int64](float64(v))
			}
		} else {
			for i, v := range rows64[start*F : (start+nb)*F] {
				x[i] = toKey[float64, int64](v)
			}
		}
		a := dst[start*G : (start+nb)*G]
		clear(a)
		m.e64.addBlock(a, x, nb, F, G)
		for r := 0; r < nb; r++ {
			out := a[r*G : r*G+G]
			if m.average > 0 {
				for j := range out {
					out[j] /= m.average
				}
			}
			if kind != outMargin {
				m.finish64(out)
			}
		}
	}
	return nil
}

func (m *Model) finish64(out []float64) {
	switch m.transform {
	case tSigmoid, tOVA:
		for j, v := range out {
			out[j] = 1 / (1 + math.Exp(-m.sigmoid*v))
		}
	case tExp:
		for j, v := range out {
			out[j] = math.Exp(v)
		}
	case tSoftmax:
		softmax64(out)
	case tLog1pExp:
		for j, v := range out {
			out[j] = math.Log1p(math.Exp(v))
		}
	case tSignSquare:
		for j, v := range out {
			out[j] = math.Copysign(v*v, v)
		}
	}
}

// Probabilities reports whether Scores are class probabilities: binary
// models with a logistic link and multiclass models.
func (m *Model) Probabilities() bool {
	switch m.Kind {
	case Binary:
		return m.transform == tSigmoid
	case Multiclass:
		return true
	}
	return false
}
