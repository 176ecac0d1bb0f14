package trees

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// lgbHeader is what a LightGBM model says besides its trees.
type lgbHeader struct {
	numClass      int
	treesPerIter  int
	maxFeatureIdx int
	objective     string
	average       bool
	featureNames  []string
}

// ParseLightGBM reads a LightGBM text model (model.save_model(), or
// model_to_string()), versions v2, v3 and v4.
func ParseLightGBM(data []byte) (*Model, error) {
	m, err := parseLightGBM(context.Background(), data)
	if err != nil {
		return nil, fmt.Errorf("lightgbm: %w", err)
	}
	m.Format = "lightgbm-text"
	return m, nil
}

// lgbTreeText is one "Tree=" block's key=value lines.
type lgbTreeText map[string]string

func parseLightGBM(ctx context.Context, data []byte) (*Model, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	header := map[string]string{}
	var trees []lgbTreeText
	var cur lgbTreeText
	line := 0
	for sc.Scan() {
		line++
		if line%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		s := strings.TrimRight(sc.Text(), "\r")
		if s == "end of trees" {
			break
		}
		if s == "" {
			continue
		}
		if line == 1 {
			if s != "tree" {
				return nil, errors.New(`not a LightGBM text model: the first line is not "tree"`)
			}
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if k == "Tree" {
			cur = lgbTreeText{}
			trees = append(trees, cur)
			continue
		}
		if !ok {
			if cur == nil {
				header[s] = "" // a flag such as average_output
			}
			continue
		}
		if cur != nil {
			cur[k] = v
		} else {
			header[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if v, ok := header["version"]; ok && v != "v2" && v != "v3" && v != "v4" {
		return nil, fmt.Errorf("version %q; want v2, v3 or v4", v)
	}
	var h lgbHeader
	var err error
	if h.numClass, err = headerInt(header, "num_class", 1); err != nil {
		return nil, err
	}
	if h.treesPerIter, err = headerInt(header, "num_tree_per_iteration", h.numClass); err != nil {
		return nil, err
	}
	if h.maxFeatureIdx, err = headerInt(header, "max_feature_idx", -1); err != nil {
		return nil, err
	}
	h.objective = header["objective"]
	_, h.average = header["average_output"]
	if fn, ok := header["feature_names"]; ok && fn != "" {
		h.featureNames = strings.Fields(fn)
	}
	m, err := newLightGBM(h, len(trees))
	if err != nil {
		return nil, err
	}
	for i, t := range trees {
		if err := treeCheck(ctx, i); err != nil {
			return nil, err
		}
		src, err := t.nodes()
		if err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
		if err := m.e64.addTree(src, i%h.treesPerIter, m.NumFeatures); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
	}
	return m, nil
}

func headerInt(h map[string]string, key string, def int) (int, error) {
	v, ok := h[key]
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("no %s in the header", key)
		}
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > maxFeatures {
		return 0, fmt.Errorf("%s=%q is not a count in [0, %d]", key, v, maxFeatures)
	}
	return n, nil
}

// newLightGBM checks the header and sets the objective.
func newLightGBM(h lgbHeader, nTrees int) (*Model, error) {
	if h.treesPerIter < 1 || h.treesPerIter > maxClasses {
		return nil, fmt.Errorf("num_tree_per_iteration %d; want 1 to %d", h.treesPerIter, maxClasses)
	}
	if h.numClass < 1 || (h.numClass > 1 && h.numClass != h.treesPerIter) {
		return nil, fmt.Errorf("num_class %d with num_tree_per_iteration %d", h.numClass, h.treesPerIter)
	}
	nf := h.maxFeatureIdx + 1
	if nf < 1 || nf > maxFeatures {
		return nil, fmt.Errorf("max_feature_idx %d out of range", h.maxFeatureIdx)
	}
	if nTrees%h.treesPerIter != 0 {
		return nil, fmt.Errorf("%d trees is not a whole number of iterations of %d", nTrees, h.treesPerIter)
	}
	m := &Model{
		Library:     "lightgbm",
		Booster:     "gbdt",
		NumFeatures: nf,
		NumTrees:    nTrees,
		groups:      h.treesPerIter,
		e64:         &ensemble[float64, int64]{},
	}
	if len(h.featureNames) > 0 {
		if len(h.featureNames) != nf {
			return nil, fmt.Errorf("%d feature_names for %d features", len(h.featureNames), nf)
		}
		m.FeatureNames = h.featureNames
	}
	if h.average {
		m.Booster = "rf"
		if nTrees > 0 {
			m.average = float64(nTrees / h.treesPerIter)
		}
	}
	if err := m.lgbObjective(h.objective); err != nil {
		return nil, err
	}
	return m, nil
}

// lgbObjective reads an objective line such as "binary sigmoid:1" or
// "multiclass num_class:3".
func (m *Model) lgbObjective(obj string) error {
	fields := strings.Fields(obj)
	m.Objective = obj
	m.transform = tIdentity
	m.sigmoid = 1
	if len(fields) == 0 {
		// The JSON dump of older LightGBM carries no objective: margins.
		return nil
	}
	m.Objective = fields[0]
	sqrt := false
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, ":")
		switch k {
		case "sigmoid":
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || !(s > 0) {
				return fmt.Errorf("objective %q: bad sigmoid %q", obj, v)
			}
			m.sigmoid = s
		case "sqrt":
			sqrt = true
		}
	}
	switch m.Objective {
	case "binary":
		m.Kind, m.NumClass, m.transform = Binary, 2, tSigmoid
	case "multiclass", "softmax":
		m.Kind, m.NumClass, m.transform = Multiclass, m.groups, tSoftmax
	case "multiclassova", "multiclass_ova", "ova", "ovr":
		m.Kind, m.NumClass, m.transform = Multiclass, m.groups, tOVA
	case "poisson", "gamma", "tweedie":
		m.transform = tExp
	case "cross_entropy", "xentropy":
		m.transform = tSigmoid
	case "cross_entropy_lambda", "xentlambda":
		m.transform = tLog1pExp
	case "lambdarank", "rank_xendcg", "xendcg", "xe_ndcg", "xe_ndcg_mart", "xendcg_mart":
		m.Kind = Ranking
	case "regression", "regression_l2", "l2", "mean_squared_error", "mse", "l2_root", "root_mean_squared_error", "rmse",
		"regression_l1", "l1", "mean_absolute_error", "mae", "huber", "fair", "quantile", "mape", "mean_absolute_percentage_error", "custom":
		if sqrt {
			m.transform = tSignSquare
		}
	default:
		return fmt.Errorf("objective %q is not supported", obj)
	}
	if m.Kind == Multiclass && m.groups < 2 {
		return fmt.Errorf("objective %q with %d trees per iteration", obj, m.groups)
	}
	if m.Kind != Multiclass && m.groups != 1 {
		return fmt.Errorf("objective %q with %d trees per iteration", obj, m.groups)
	}
	return nil
}

func floatsOf(s string) ([]float64, error) {
	f := strings.Fields(s)
	out := make([]float64, len(f))
	for i, x := range f {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%q is not a number", x)
		}
		out[i] = v
	}
	return out, nil
}

func intsOf(s string) ([]int, error) {
	f := strings.Fields(s)
	out := make([]int, len(f))
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil || v < math.MinInt32 || v > math.MaxUint32 {
			return nil, fmt.Errorf("%q is not an integer", x)
		}
		out[i] = int(v)
	}
	return out, nil
}

// nodes converts one text tree. Internal nodes are 0..num_leaves-2; a
// child < 0 is leaf ^child, placed after the internal nodes.
func (t lgbTreeText) nodes() ([]rnode[float64], error) {
	nl, err := strconv.Atoi(t["num_leaves"])
	if err != nil || nl < 1 || nl > maxNodes {
		return nil, fmt.Errorf("num_leaves=%q is not a count in [1, %d]", t["num_leaves"], maxNodes)
	}
	leaves, err := floatsOf(t["leaf_value"])
	if err != nil {
		return nil, fmt.Errorf("leaf_value: %w", err)
	}
	if len(leaves) != nl {
		return nil, fmt.Errorf("leaf_value has %d values for %d leaves", len(leaves), nl)
	}
	var lin []*linLeaf[float64]
	if t["is_linear"] == "1" {
		if lin, err = t.linearLeaves(nl); err != nil {
			return nil, err
		}
	}
	leafNode := func(i int) rnode[float64] {
		r := rnode[float64]{leaf: true, value: leaves[i]}
		if lin != nil {
			r.lin = lin[i]
		}
		return r
	}
	if nl == 1 {
		return []rnode[float64]{leafNode(0)}, nil
	}
	ni := nl - 1
	get := func(key string) ([]int, error) {
		v, err := intsOf(t[key])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if len(v) != ni {
			return nil, fmt.Errorf("%s has %d values for %d splits", key, len(v), ni)
		}
		return v, nil
	}
	feat, err := get("split_feature")
	if err != nil {
		return nil, err
	}
	dt, err := get("decision_type")
	if err != nil {
		return nil, err
	}
	left, err := get("left_child")
	if err != nil {
		return nil, err
	}
	right, err := get("right_child")
	if err != nil {
		return nil, err
	}
	thr, err := floatsOf(t["threshold"])
	if err != nil {
		return nil, fmt.Errorf("threshold: %w", err)
	}
	if len(thr) != ni {
		return nil, fmt.Errorf("threshold has %d values for %d splits", len(thr), ni)
	}
	var catBounds, catWords []int
	if nc, _ := strconv.Atoi(t["num_cat"]); nc > 0 {
		if catBounds, err = intsOf(t["cat_boundaries"]); err != nil {
			return nil, fmt.Errorf("cat_boundaries: %w", err)
		}
		if catWords, err = intsOf(t["cat_threshold"]); err != nil {
			return nil, fmt.Errorf("cat_threshold: %w", err)
		}
		if len(catBounds) != nc+1 {
			return nil, fmt.Errorf("cat_boundaries has %d values for num_cat %d", len(catBounds), nc)
		}
	}
	out := make([]rnode[float64], ni+nl)
	child := func(c int) int {
		if c < 0 {
			return ni + ^c
		}
		return c
	}
	for i := 0; i < nl; i++ {
		out[ni+i] = leafNode(i)
	}
	for i := 0; i < ni; i++ {
		r := &out[i]
		r.feat, r.left, r.right = feat[i], child(left[i]), child(right[i])
		if (left[i] < 0 && ^left[i] >= nl) || (right[i] < 0 && ^right[i] >= nl) || left[i] >= ni || right[i] >= ni {
			return nil, fmt.Errorf("node %d: child out of range", i)
		}
		if err := lgbSplit(r, dt[i], thr[i], func(idx int) ([]uint32, error) {
			if idx < 0 || idx+1 >= len(catBounds) {
				return nil, fmt.Errorf("categorical split %d out of range [0, %d)", idx, max(len(catBounds)-1, 0))
			}
			b, e := catBounds[idx], catBounds[idx+1]
			if b < 0 || e < b || e > len(catWords) {
				return nil, fmt.Errorf("cat_boundaries [%d, %d) outside the %d words of cat_threshold", b, e, len(catWords))
			}
			s := make([]uint32, e-b)
			for j := range s {
				s[j] = uint32(catWords[b+j])
			}
			return s, nil
		}); err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
	}
	// The root is internal node 0.
	return out, nil
}

// linearLeaves reads the linear models of a linear tree (LightGBM's
// linear_tree=true): leaf_const per leaf, num_features per leaf, and
// leaf_features and leaf_coeff flattened over the leaves in order.
func (t lgbTreeText) linearLeaves(nl int) ([]*linLeaf[float64], error) {
	consts, err := floatsOf(t["leaf_const"])
	if err != nil {
		return nil, fmt.Errorf("leaf_const: %w", err)
	}
	counts, err := intsOf(t["num_features"])
	if err != nil {
		return nil, fmt.Errorf("num_features: %w", err)
	}
	feats, err := intsOf(t["leaf_features"])
	if err != nil {
		return nil, fmt.Errorf("leaf_features: %w", err)
	}
	coeffs, err := floatsOf(t["leaf_coeff"])
	if err != nil {
		return nil, fmt.Errorf("leaf_coeff: %w", err)
	}
	if len(consts) != nl || len(counts) != nl {
		return nil, fmt.Errorf("linear tree: %d leaf_const and %d num_features for %d leaves", len(consts), len(counts), nl)
	}
	if len(feats) != len(coeffs) {
		return nil, fmt.Errorf("linear tree: %d leaf_features but %d leaf_coeff", len(feats), len(coeffs))
	}
	out := make([]*linLeaf[float64], nl)
	off := 0
	for i, c := range counts {
		if c < 0 || c > len(feats)-off {
			return nil, fmt.Errorf("linear tree: num_features %v do not add up to the %d leaf_features", counts, len(feats))
		}
		l := &linLeaf[float64]{c: consts[i], feat: make([]int32, c), coeff: coeffs[off : off+c]}
		for j, f := range feats[off : off+c] {
			l.feat[j] = int32(f)
		}
		off += c
		out[i] = l
	}
	if off != len(feats) {
		return nil, fmt.Errorf("linear tree: num_features %v do not add up to the %d leaf_features", counts, len(feats))
	}
	return out, nil
}

// lgbSplit sets a node's threshold and flags from LightGBM's decision_type
// bits: 1 categorical, 2 default left, bits 2-3 the missing type (0 None,
// 1 Zero, 2 NaN).
func lgbSplit(r *rnode[float64], decision int, thr float64, catSet func(int) ([]uint32, error)) error {
	missing := (decision >> 2) & 3
	defLeft := decision&2 != 0
	if decision&1 != 0 {
		if thr != math.Trunc(thr) || thr < 0 || thr > maxNodes {
			return fmt.Errorf("categorical threshold %v is not a split index", thr)
		}
		s, err := catSet(int(thr))
		if err != nil {
			return err
		}
		r.cats = s
		r.flags = flagCat | flagCatLeft
		if missing == 2 {
			r.flags |= flagCatNaN // NaN goes right: the default child below
		}
		return nil
	}
	if math.IsNaN(thr) {
		return errors.New("threshold is NaN")
	}
	r.thr = nextUp(thr)
	switch missing {
	case 0: // None: NaN is read as 0.
		if 0 <= thr {
			r.flags |= flagDefLeft
		}
	case 1: // Zero: NaN is 0, and 0 is missing.
		r.flags |= flagZeroMiss
		if defLeft {
			r.flags |= flagDefLeft
		}
	case 2:
		if defLeft {
			r.flags |= flagDefLeft
		}
	default:
		return fmt.Errorf("decision_type %d: unknown missing type %d", decision, missing)
	}
	return nil
}

// ParseLightGBMJSON reads LightGBM's JSON dump (booster.dump_model()).
// Dumps without an "objective" (older LightGBM) score as raw margins.
func ParseLightGBMJSON(data []byte) (*Model, error) {
	m, err := parseLightGBMJSON(context.Background(), data)
	if err != nil {
		return nil, fmt.Errorf("lightgbm json: %w", err)
	}
	m.Format = "lightgbm-json"
	return m, nil
}

type lgbJSON struct {
	Name          string     `json:"name"`
	Version       string     `json:"version"`
	NumClass      *int       `json:"num_class"`
	TreesPerIter  *int       `json:"num_tree_per_iteration"`
	MaxFeatureIdx *int       `json:"max_feature_idx"`
	Objective     string     `json:"objective"`
	AverageOutput bool       `json:"average_output"`
	FeatureNames  []string   `json:"feature_names"`
	TreeInfo      []struct { //
		Structure *lgbJSONNode `json:"tree_structure"`
	} `json:"tree_info"`
}

type lgbJSONNode struct {
	SplitFeature *int            `json:"split_feature"`
	Threshold    json.RawMessage `json:"threshold"`
	DecisionType string          `json:"decision_type"`
	DefaultLeft  bool            `json:"default_left"`
	MissingType  string          `json:"missing_type"`
	Left         *lgbJSONNode    `json:"left_child"`
	Right        *lgbJSONNode    `json:"right_child"`
	LeafValue    *float64        `json:"leaf_value"`
	LeafConst    *float64        `json:"leaf_const"`
	LeafFeatures []int32         `json:"leaf_features"`
	LeafCoeff    []float64       `json:"leaf_coeff"`
}

func parseLightGBMJSON(ctx context.Context, data []byte) (*Model, error) {
	var doc lgbJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Version != "" && doc.Version != "v2" && doc.Version != "v3" && doc.Version != "v4" {
		return nil, fmt.Errorf("version %q; want v2, v3 or v4", doc.Version)
	}
	if doc.MaxFeatureIdx == nil {
		return nil, errors.New("no max_feature_idx; is this LightGBM's dump_model() output?")
	}
	h := lgbHeader{numClass: 1, maxFeatureIdx: *doc.MaxFeatureIdx, objective: doc.Objective,
		average: doc.AverageOutput, featureNames: doc.FeatureNames}
	if doc.NumClass != nil {
		h.numClass = *doc.NumClass
	}
	h.treesPerIter = h.numClass
	if doc.TreesPerIter != nil {
		h.treesPerIter = *doc.TreesPerIter
	}
	m, err := newLightGBM(h, len(doc.TreeInfo))
	if err != nil {
		return nil, err
	}
	budget := maxCatWords
	for i, t := range doc.TreeInfo {
		if err := treeCheck(ctx, i); err != nil {
			return nil, err
		}
		if t.Structure == nil {
			return nil, fmt.Errorf("tree %d: no tree_structure", i)
		}
		var src []rnode[float64]
		if err := flattenJSON(t.Structure, &src, 0, &budget); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
		if err := m.e64.addTree(src, i%h.treesPerIter, m.NumFeatures); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
	}
	return m, nil
}

// flattenJSON appends n and its subtree to src in preorder and returns
// nothing; n lands at the index len(*src) had on entry.
func flattenJSON(n *lgbJSONNode, src *[]rnode[float64], depth int, budget *int) error {
	if depth > 10000 {
		return errors.New("tree deeper than 10000")
	}
	if len(*src) >= maxNodes {
		return fmt.Errorf("more than %d nodes", maxNodes)
	}
	if n.SplitFeature == nil {
		if n.LeafValue == nil {
			return errors.New("a node has neither split_feature nor leaf_value")
		}
		r := rnode[float64]{leaf: true, value: *n.LeafValue}
		if n.LeafConst != nil {
			if len(n.LeafFeatures) != len(n.LeafCoeff) {
				return fmt.Errorf("linear leaf: %d leaf_features but %d leaf_coeff", len(n.LeafFeatures), len(n.LeafCoeff))
			}
			r.lin = &linLeaf[float64]{c: *n.LeafConst, feat: append([]int32{}, n.LeafFeatures...), coeff: n.LeafCoeff}
		}
		*src = append(*src, r)
		return nil
	}
	if n.Left == nil || n.Right == nil {
		return errors.New("a split without both children")
	}
	at := len(*src)
	*src = append(*src, rnode[float64]{feat: *n.SplitFeature})
	var r rnode[float64]
	r.feat = *n.SplitFeature
	decision := 0
	if n.DefaultLeft {
		decision |= 2
	}
	switch n.MissingType {
	case "", "None":
	case "Zero":
		decision |= 1 << 2
	case "NaN":
		decision |= 2 << 2
	default:
		return fmt.Errorf("missing_type %q; want None, Zero or NaN", n.MissingType)
	}
	var thr float64
	var cats []uint32
	switch n.DecisionType {
	case "<=", "":
		if err := json.Unmarshal(n.Threshold, &thr); err != nil {
			return fmt.Errorf("threshold %s: %w", n.Threshold, err)
		}
	case "==":
		decision |= 1
		var s string
		if err := json.Unmarshal(n.Threshold, &s); err != nil {
			return fmt.Errorf("categorical threshold %s: want \"a||b||...\"", n.Threshold)
		}
		var vals []int
		for _, part := range strings.Split(s, "||") {
			c, err := strconv.Atoi(part)
			if err != nil {
				return fmt.Errorf("categorical threshold %q: %q is not a category", s, part)
			}
			vals = append(vals, c)
		}
		var err error
		if cats, err = bitset(vals, budget); err != nil {
			return err
		}
	default:
		return fmt.Errorf("decision_type %q; want <= or ==", n.DecisionType)
	}
	if err := lgbSplit(&r, decision, thr, func(int) ([]uint32, error) { return cats, nil }); err != nil {
		return err
	}
	r.left = len(*src)
	if err := flattenJSON(n.Left, src, depth+1, budget); err != nil {
		return err
	}
	r.right = len(*src)
	if err := flattenJSON(n.Right, src, depth+1, budget); err != nil {
		return err
	}
	(*src)[at] = r
	return nil
}
