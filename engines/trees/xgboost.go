package trees

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// xgbDoc is an XGBoost model as its JSON (and UBJSON) serialisation holds it.
type xgbDoc struct {
	Learner struct {
		FeatureNames      []string        `json:"feature_names"`
		FeatureTypes      []string        `json:"feature_types"`
		GradientBooster   json.RawMessage `json:"gradient_booster"`
		LearnerModelParam struct {
			BaseScore  string `json:"base_score"`
			NumClass   string `json:"num_class"`
			NumFeature string `json:"num_feature"`
			NumTarget  string `json:"num_target"`
		} `json:"learner_model_param"`
		Objective struct {
			Name string `json:"name"`
		} `json:"objective"`
	} `json:"learner"`
	Version []int `json:"version"`
}

type xgbBooster struct {
	Name       string          `json:"name"`
	Model      json.RawMessage `json:"model"`
	GBTree     *xgbBooster     `json:"gbtree"`
	WeightDrop []f32           `json:"weight_drop"`
}

type xgbGBTree struct {
	Param struct {
		NumTrees string `json:"num_trees"`
	} `json:"gbtree_model_param"`
	TreeInfo []int     `json:"tree_info"`
	Trees    []xgbTree `json:"trees"`
}

type xgbLinear struct {
	Weights []f32 `json:"weights"`
}

// xgbTree is one tree in XGBoost's column layout: node i's fields sit at
// index i of each slice. The legacy binary reader fills the same struct.
type xgbTree struct {
	Param struct {
		NumNodes       string `json:"num_nodes"`
		SizeLeafVector string `json:"size_leaf_vector"`
	} `json:"tree_param"`
	Left               []int     `json:"left_children"`
	Right              []int     `json:"right_children"`
	SplitIndices       []int     `json:"split_indices"`
	SplitConditions    []f32     `json:"split_conditions"`
	DefaultLeft        []boolish `json:"default_left"`
	SplitType          []int     `json:"split_type"`
	Categories         []int     `json:"categories"`
	CategoriesNodes    []int     `json:"categories_nodes"`
	CategoriesSegments []int     `json:"categories_segments"`
	CategoriesSizes    []int     `json:"categories_sizes"`
}

// f32 is a float32 that also reads null (NaN) and out-of-range numbers
// (infinities): XGBoost writes NaN thresholds on categorical nodes, and
// jsonSafe turns NaN and Infinity into those.
type f32 float32

func (f *f32) UnmarshalJSON(d []byte) error {
	if string(d) == "null" {
		*f = f32(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(string(d), 32)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return err
	}
	*f = f32(v)
	return nil
}

// jsonSafe rewrites the bare NaN, Infinity and -Infinity that XGBoost's
// JSON writer emits into null, 1e999 and -1e999, which encoding/json reads.
func jsonSafe(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data)+64)
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case in && c == '\\' && i+1 < len(data):
			out = append(out, c, data[i+1])
			i++
			continue
		case c == '"':
			in = !in
		case !in && bytes.HasPrefix(data[i:], []byte("NaN")):
			out = append(out, "null"...)
			i += 2
			continue
		case !in && bytes.HasPrefix(data[i:], []byte("Infinity")):
			out = append(out, "1e999"...)
			i += 7
			continue
		}
		out = append(out, c)
	}
	return out
}

// boolish reads XGBoost's default_left, written as 0/1 or true/false.
type boolish bool

func (b *boolish) UnmarshalJSON(d []byte) error {
	switch string(d) {
	case "1", "true":
		*b = true
	case "0", "false":
		*b = false
	default:
		return fmt.Errorf("default_left: want 0, 1, true or false, got %s", d)
	}
	return nil
}

// ParseXGBoostJSON reads a model saved by XGBoost as JSON
// (booster.save_model("model.json")).
func ParseXGBoostJSON(data []byte) (*Model, error) {
	m, err := parseXGBoostJSON(context.Background(), data)
	if err != nil {
		return nil, fmt.Errorf("xgboost json: %w", err)
	}
	m.Format = "xgboost-json"
	return m, nil
}

func parseXGBoostJSON(ctx context.Context, data []byte) (*Model, error) {
	var doc xgbDoc
	data = jsonSafe(data)
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Learner.GradientBooster) == 0 {
		return nil, errors.New("no learner.gradient_booster; is this an XGBoost model saved with save_model?")
	}
	var gb xgbBooster
	if err := json.Unmarshal(doc.Learner.GradientBooster, &gb); err != nil {
		return nil, fmt.Errorf("gradient_booster: %w", err)
	}
	p := doc.Learner.LearnerModelParam
	hdr := xgbHeader{
		objective:    doc.Learner.Objective.Name,
		featureNames: doc.Learner.FeatureNames,
		featureTypes: doc.Learner.FeatureTypes,
		booster:      gb.Name,
	}
	var err error
	if hdr.baseScore, err = parseScore(p.BaseScore); err != nil {
		return nil, fmt.Errorf("learner_model_param.base_score: %w", err)
	}
	if hdr.numClass, err = parseCount(p.NumClass, "num_class"); err != nil {
		return nil, err
	}
	if hdr.numFeature, err = parseCount(p.NumFeature, "num_feature"); err != nil {
		return nil, err
	}
	if p.NumTarget != "" && p.NumTarget != "1" && p.NumTarget != "0" {
		return nil, fmt.Errorf("num_target %s: multi-target models are not supported; train one model per target", p.NumTarget)
	}
	var trees xgbGBTree
	switch gb.Name {
	case "gbtree":
		if err := json.Unmarshal(gb.Model, &trees); err != nil {
			return nil, fmt.Errorf("gbtree model: %w", err)
		}
	case "dart":
		if gb.GBTree == nil {
			return nil, errors.New("dart booster without its gbtree")
		}
		if err := json.Unmarshal(gb.GBTree.Model, &trees); err != nil {
			return nil, fmt.Errorf("dart gbtree model: %w", err)
		}
		hdr.weightDrop = f32s(gb.WeightDrop)
	case "gblinear":
		var lin xgbLinear
		if err := json.Unmarshal(gb.Model, &lin); err != nil {
			return nil, fmt.Errorf("gblinear model: %w", err)
		}
		return buildXGBoost(ctx, hdr, nil, f32s(lin.Weights))
	default:
		return nil, fmt.Errorf("booster %q is not supported; want gbtree, dart or gblinear", gb.Name)
	}
	hdr.treeInfo = trees.TreeInfo
	return buildXGBoost(ctx, hdr, trees.Trees, nil)
}

// parseScore reads base_score, written as "5E-1" or, by XGBoost 2.1+, "[5E-1]".
func parseScore(s string) (float32, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
	if s == "" {
		return 0.5, nil
	}
	if strings.Contains(s, ",") {
		return 0, fmt.Errorf("%q: a base_score per target is not supported", s)
	}
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return float32(f), nil
}

func parseCount(s, name string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxFeatures {
		return 0, fmt.Errorf("learner_model_param.%s: %q is not a count in [0, %d]", name, s, maxFeatures)
	}
	return n, nil
}

// xgbHeader is what every XGBoost format says besides the trees.
type xgbHeader struct {
	objective    string
	booster      string
	baseScore    float32
	numClass     int
	numFeature   int
	featureNames []string
	featureTypes []string
	treeInfo     []int
	weightDrop   []float32
}

// buildXGBoost compiles trees (gbtree, dart) or linear weights (gblinear).
func buildXGBoost(ctx context.Context, h xgbHeader, trees []xgbTree, linear []float32) (*Model, error) {
	if h.numClass > maxClasses {
		return nil, fmt.Errorf("num_class %d is over the limit of %d", h.numClass, maxClasses)
	}
	m := &Model{
		Library:     "xgboost",
		Booster:     h.booster,
		Objective:   h.objective,
		NumFeatures: h.numFeature,
		groups:      max(h.numClass, 1),
	}
	if m.NumFeatures == 0 {
		return nil, errors.New("num_feature is 0")
	}
	if len(h.featureNames) > 0 {
		if len(h.featureNames) != m.NumFeatures {
			return nil, fmt.Errorf("%d feature_names for %d features", len(h.featureNames), m.NumFeatures)
		}
		m.FeatureNames = h.featureNames
	}
	if err := m.xgbObjective(h.baseScore); err != nil {
		return nil, err
	}
	if h.booster == "gblinear" {
		if len(linear) != (m.NumFeatures+1)*m.groups {
			return nil, fmt.Errorf("gblinear: %d weights, want (num_feature+1)*groups = %d", len(linear), (m.NumFeatures+1)*m.groups)
		}
		for _, w := range linear {
			if w != w {
				return nil, errors.New("gblinear: a weight is NaN")
			}
		}
		m.linear = linear
		return m, nil
	}
	if len(h.treeInfo) != len(trees) {
		return nil, fmt.Errorf("%d trees but tree_info has %d entries", len(trees), len(h.treeInfo))
	}
	if h.booster == "dart" && len(h.weightDrop) != len(trees) {
		return nil, fmt.Errorf("dart: %d trees but weight_drop has %d entries", len(trees), len(h.weightDrop))
	}
	e := &ensemble[float32, int32]{}
	budget := maxCatWords
	for i := range trees {
		if err := treeCheck(ctx, i); err != nil {
			return nil, err
		}
		g := h.treeInfo[i]
		if g < 0 || g >= m.groups {
			return nil, fmt.Errorf("tree %d: group %d out of range [0, %d)", i, g, m.groups)
		}
		w := float32(1)
		if h.booster == "dart" {
			w = h.weightDrop[i]
		}
		src, err := trees[i].nodes(m.NumFeatures, w, h.booster == "dart", &budget)
		if err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
		if err := e.addTree(src, g, m.NumFeatures); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
	}
	m.e32, m.NumTrees = e, len(trees)
	return m, nil
}

// nodes converts one XGBoost tree. A dart tree's leaves are multiplied by
// its weight in float32, as XGBoost does before adding them.
func (t *xgbTree) nodes(nFeatures int, w float32, dart bool, budget *int) ([]rnode[float32], error) {
	n := len(t.Left)
	if n == 0 {
		return nil, errors.New("no nodes")
	}
	if t.Param.SizeLeafVector != "" && t.Param.SizeLeafVector != "0" && t.Param.SizeLeafVector != "1" {
		return nil, fmt.Errorf("size_leaf_vector %s: vector-leaf (multi-target) trees are not supported", t.Param.SizeLeafVector)
	}
	if len(t.Right) != n || len(t.SplitIndices) != n || len(t.SplitConditions) != n {
		return nil, fmt.Errorf("node arrays differ in length: left %d, right %d, split_indices %d, split_conditions %d",
			n, len(t.Right), len(t.SplitIndices), len(t.SplitConditions))
	}
	if len(t.DefaultLeft) != n && len(t.DefaultLeft) != 0 {
		return nil, fmt.Errorf("default_left has %d entries for %d nodes", len(t.DefaultLeft), n)
	}
	if len(t.SplitType) != n && len(t.SplitType) != 0 {
		return nil, fmt.Errorf("split_type has %d entries for %d nodes", len(t.SplitType), n)
	}
	cats, err := t.catSets(budget)
	if err != nil {
		return nil, err
	}
	out := make([]rnode[float32], n)
	for i := range out {
		r := &out[i]
		if t.Left[i] == -1 {
			r.leaf = true
			r.value = float32(t.SplitConditions[i])
			if dart {
				r.value *= w
			}
			continue
		}
		r.left, r.right, r.feat = t.Left[i], t.Right[i], t.SplitIndices[i]
		r.thr = float32(t.SplitConditions[i])
		if len(t.DefaultLeft) > 0 && t.DefaultLeft[i] {
			r.flags |= flagDefLeft
		}
		if len(t.SplitType) > 0 && t.SplitType[i] == 1 {
			s, ok := cats[i]
			if !ok {
				return nil, fmt.Errorf("node %d: categorical split without categories", i)
			}
			r.flags |= flagCat | flagCatNaN
			r.cats = s
		}
	}
	return out, nil
}

// catSets builds each categorical node's bitset from the flat category list.
func (t *xgbTree) catSets(budget *int) (map[int][]uint32, error) {
	k := len(t.CategoriesNodes)
	if len(t.CategoriesSegments) != k || len(t.CategoriesSizes) != k {
		return nil, fmt.Errorf("categories_nodes %d, categories_segments %d, categories_sizes %d: lengths differ",
			k, len(t.CategoriesSegments), len(t.CategoriesSizes))
	}
	if k == 0 {
		return nil, nil
	}
	sets := make(map[int][]uint32, k)
	for j, nd := range t.CategoriesNodes {
		beg, size := t.CategoriesSegments[j], t.CategoriesSizes[j]
		if beg < 0 || size < 0 || beg > len(t.Categories) || size > len(t.Categories)-beg {
			return nil, fmt.Errorf("categories segment %d (%d, %d) outside the %d categories", j, beg, size, len(t.Categories))
		}
		s, err := bitset(t.Categories[beg:beg+size], budget)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", nd, err)
		}
		sets[nd] = s
	}
	return sets, nil
}

func f32s(v []f32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// xgbObjective sets the link and the margin of base_score for objective.
func (m *Model) xgbObjective(base float32) error {
	obj := m.Objective
	m.transform = tIdentity
	m.base32 = base
	switch obj {
	case "binary:logistic", "reg:logistic":
		if !(base > 0 && base < 1) {
			return fmt.Errorf("base_score %v: %s needs a value in (0, 1)", base, obj)
		}
		m.base32 = -logf(1/base - 1)
		m.transform = tSigmoid
		if obj == "binary:logistic" {
			m.Kind, m.NumClass = Binary, 2
		}
	case "binary:logitraw":
		// XGBoost takes logitraw's base_score as a margin as it is.
		m.Kind, m.NumClass = Binary, 2
	case "binary:hinge":
		m.Kind, m.NumClass = Binary, 2
		m.transform = tHinge
	case "count:poisson", "reg:gamma", "reg:tweedie", "survival:cox", "survival:aft":
		if !(base > 0) {
			return fmt.Errorf("base_score %v: %s needs a positive value", base, obj)
		}
		m.base32 = logf(base)
		m.transform = tExp
	case "multi:softprob", "multi:softmax":
		if m.groups < 2 {
			return fmt.Errorf("%s with num_class %d; want at least 2", obj, m.groups)
		}
		m.Kind, m.NumClass = Multiclass, m.groups
		m.transform = tSoftmax
		if obj == "multi:softmax" {
			m.transform = tSoftmaxClass
		}
	case "reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror",
		"reg:absoluteerror", "reg:quantileerror":
	default:
		if strings.HasPrefix(obj, "rank:") {
			m.Kind = Ranking
			break
		}
		return fmt.Errorf("objective %q is not supported", obj)
	}
	if m.Kind != Multiclass && m.groups != 1 {
		return fmt.Errorf("objective %s with num_class %d", obj, m.groups)
	}
	return nil
}
