package llm

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// kvForm is how a graph passes one layer's key/value cache.
type kvForm int

const (
	// kvSplit: a key and a value tensor per layer, each [batch, kv_heads,
	// past, head_dim] (optimum's past_key_values.{i}.key/.value,
	// onnxruntime-genai's and others' past_key_{i}/past_value_{i}).
	kvSplit kvForm = iota
	// kvStacked: one tensor per layer, [2, batch, heads, past, head_dim],
	// key then value (ONNX Runtime's GPT-2 tools: past_{i}/present_{i}).
	kvStacked
)

func (f kvForm) String() string {
	if f == kvStacked {
		return "past_{i} [2, batch, heads, past, head_dim]"
	}
	return "past key and value per layer [batch, kv_heads, past, head_dim]"
}

// ioInfo is one graph input or output as ONNX Runtime declares it.
type ioInfo struct {
	Name  string
	Elem  ort.TensorElementDataType
	Shape []int64 // -1 (or 0 from the binding) for a symbolic dimension
}

// layout is what Open learnt from the graph's inputs and outputs: which
// tensor is which, their element types, and the cache's geometry. It is
// read-only after detectLayout.
type layout struct {
	ids, mask, positions string // positions "" when the graph takes none
	idsElem, maskElem    ort.TensorElementDataType
	posElem              ort.TensorElementDataType
	useCacheBranch       string // optimum's merged decoder's bool input, or ""
	logits               string
	logitsElem           ort.TensorElementDataType
	form                 kvForm
	layers               int
	past, present        []string // per KV tensor: split key0, value0, key1, ...; stacked past_0, past_1, ...
	kvElem               ort.TensorElementDataType
	kvHeads, headDim     int
	// lastOnly is set when the session's graph was rewritten to compute
	// logits at each row's last token only (lastPositionLogits): Step
	// then feeds logitRowsInput and reads [rows, 1, vocab].
	lastOnly bool
	// slots is set when the session's graph was rewritten to append the
	// cache in place (slotAttention): Step then keeps the slot cache
	// (slots.go), feeds no attention_mask and feeds seqlensInput and
	// totalLenInput.
	slots bool
}

// kvTensors is the number of cache tensors per run.
func (l *layout) kvTensors() int { return len(l.past) }

// elemSize is the bytes of one cache element.
func (l *layout) elemSize() int {
	if l.kvElem == ort.TensorElementDataTypeFloat16 {
		return 2
	}
	return 4
}

// inputNames and outputNames are the session's, in the order Step builds
// its values.
func (l *layout) inputNames() []string {
	n := []string{l.ids}
	if !l.slots {
		n = append(n, l.mask)
	}
	if l.positions != "" {
		n = append(n, l.positions)
	}
	if l.useCacheBranch != "" {
		n = append(n, l.useCacheBranch)
	}
	n = append(n, l.past...)
	if l.lastOnly {
		n = append(n, logitRowsInput)
	}
	if l.slots {
		n = append(n, seqlensInput, totalLenInput)
	}
	return n
}

func (l *layout) outputNames() []string { return append([]string{l.logits}, l.present...) }

// The name patterns of the cache tensors. Each yields the layer index and,
// for split forms, which of key and value.
var (
	pastSplitRE    = regexp.MustCompile(`^past_key_values\.(\d+)\.(key|value)$`)
	pastSplitAltRE = regexp.MustCompile(`^past_(key|value)_(\d+)$`)
	pastStackedRE  = regexp.MustCompile(`^past_(\d+)$`)
	presSplitRE    = regexp.MustCompile(`^present\.(\d+)\.(key|value)$`)
	presSplitAltRE = regexp.MustCompile(`^present_(key|value)_(\d+)$`)
	presStackedRE  = regexp.MustCompile(`^present_(\d+)$`)
)

// expectedInputs says what detectLayout accepts, for its errors.
const expectedInputs = "input_ids, attention_mask, optional position_ids and use_cache_branch, " +
	"and per layer i past_key_values.{i}.key/.value, past_key_{i}/past_value_{i}, or past_{i} of rank 5; " +
	"outputs logits and present.{i}.key/.value, present_key_{i}/present_value_{i}, or present_{i}"

// geometry is what config.json says about the cache, to check the graph
// against and to fill its symbolic dimensions.
type geometry struct {
	layers, heads, kvHeads, headDim int
}

// kvSlot parses a cache tensor's name: its layer and 0 (key, or a stacked
// tensor) or 1 (value).
func kvSlot(name string, split, alt, stacked *regexp.Regexp) (form kvForm, layer, kv int, ok bool) {
	atoi := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n < maxLayers
	}
	which := func(s string) int {
		if s == "value" {
			return 1
		}
		return 0
	}
	if m := split.FindStringSubmatch(name); m != nil {
		l, ok := atoi(m[1])
		return kvSplit, l, which(m[2]), ok
	}
	if m := alt.FindStringSubmatch(name); m != nil {
		l, ok := atoi(m[2])
		return kvSplit, l, which(m[1]), ok
	}
	if m := stacked.FindStringSubmatch(name); m != nil {
		l, ok := atoi(m[1])
		return kvStacked, l, 0, ok
	}
	return 0, 0, 0, false
}

// detectLayout finds the decoder's interface among a graph's inputs and
// outputs by their names, and checks their element types and ranks and the
// cache's geometry against config.json's. Its errors name what the graph
// declares and what was expected.
func detectLayout(ins, outs []ioInfo, geo geometry) (*layout, error) {
	l := &layout{}
	seen := func() string {
		parts := make([]string, len(ins))
		for i, in := range ins {
			parts[i] = fmt.Sprintf("%s %s %s", in.Name, elemName(in.Elem), shapeString(in.Shape))
		}
		return strings.Join(parts, ", ")
	}
	fail := func(format string, args ...any) (*layout, error) {
		return nil, fmt.Errorf("%s; the graph's inputs are %s; expected %s", fmt.Sprintf(format, args...), seen(), expectedInputs)
	}
	type slot struct {
		name  string
		shape []int64
	}
	pastSlots := map[[2]int]slot{}
	forms := map[kvForm]bool{}
	for _, in := range ins {
		switch in.Name {
		case "input_ids", "attention_mask", "position_ids":
			if in.Elem != ort.TensorElementDataTypeInt64 && in.Elem != ort.TensorElementDataTypeInt32 {
				return fail("input %s is %s, not int32 or int64", in.Name, elemName(in.Elem))
			}
			if len(in.Shape) != 2 {
				return fail("input %s has rank %d, not 2 ([batch, sequence])", in.Name, len(in.Shape))
			}
			switch in.Name {
			case "input_ids":
				l.ids, l.idsElem = in.Name, in.Elem
			case "attention_mask":
				l.mask, l.maskElem = in.Name, in.Elem
			default:
				l.positions, l.posElem = in.Name, in.Elem
			}
			continue
		case "use_cache_branch":
			if in.Elem != ort.TensorElementDataTypeBool || len(in.Shape) > 1 || (len(in.Shape) == 1 && in.Shape[0] > 1) {
				return fail("input use_cache_branch is %s %s, not a bool of shape [1]", elemName(in.Elem), shapeString(in.Shape))
			}
			l.useCacheBranch = in.Name
			continue
		}
		form, layer, kv, ok := kvSlot(in.Name, pastSplitRE, pastSplitAltRE, pastStackedRE)
		if !ok {
			return fail("unknown input %q", in.Name)
		}
		forms[form] = true
		if _, dup := pastSlots[[2]int{layer, kv}]; dup {
			return fail("input %q names layer %d's cache twice", in.Name, layer)
		}
		if in.Elem != ort.TensorElementDataTypeFloat && in.Elem != ort.TensorElementDataTypeFloat16 {
			return fail("cache input %s is %s, not float32 or float16", in.Name, elemName(in.Elem))
		}
		if l.kvElem != 0 && in.Elem != l.kvElem {
			return fail("cache input %s is %s but others are %s", in.Name, elemName(in.Elem), elemName(l.kvElem))
		}
		l.kvElem = in.Elem
		pastSlots[[2]int{layer, kv}] = slot{in.Name, in.Shape}
	}
	switch {
	case l.ids == "":
		return fail("no input_ids")
	case l.mask == "":
		return fail("no attention_mask (batching sequences of different lengths needs it)")
	case len(pastSlots) == 0:
		return fail("no cache input (past_*): export with the cache, e.g. optimum's task text-generation-with-past")
	case len(forms) > 1:
		return fail("cache inputs mix the split and stacked forms")
	}
	for f := range forms {
		l.form = f
	}
	per := 2
	if l.form == kvStacked {
		per = 1
	}
	if len(pastSlots)%per != 0 {
		return fail("cache inputs are not a key and a value per layer")
	}
	l.layers = len(pastSlots) / per
	if geo.layers > 0 && l.layers != geo.layers {
		return fail("the graph has a cache for %d layers but config.json says %d", l.layers, geo.layers)
	}
	// Geometry: declared static dimensions, else config.json's.
	headAxis, lenAxis, dimAxis, rank := 1, 2, 3, 4
	if l.form == kvStacked {
		headAxis, lenAxis, dimAxis, rank = 2, 3, 4, 5
	}
	wantHeads := geo.kvHeads
	if l.form == kvStacked {
		wantHeads = geo.heads // ONNX Runtime's GPT-2 layout has no GQA
	}
	l.kvHeads, l.headDim = wantHeads, geo.headDim
	for layer := 0; layer < l.layers; layer++ {
		for kv := 0; kv < per; kv++ {
			s, ok := pastSlots[[2]int{layer, kv}]
			if !ok {
				return fail("no cache input for layer %d's %s", layer, [2]string{"key", "value"}[kv])
			}
			if len(s.shape) != rank {
				return fail("cache input %s has rank %d, expected %d", s.name, len(s.shape), rank)
			}
			if l.form == kvStacked && s.shape[0] > 0 && s.shape[0] != 2 {
				return fail("cache input %s's first dimension is %d, expected 2 (key and value)", s.name, s.shape[0])
			}
			if h := s.shape[headAxis]; h > 0 {
				if l.kvHeads > 0 && int64(l.kvHeads) != h {
					return fail("cache input %s has %d heads, but config.json says %d", s.name, h, l.kvHeads)
				}
				l.kvHeads = int(h)
			}
			if d := s.shape[dimAxis]; d > 0 {
				if l.headDim > 0 && int64(l.headDim) != d {
					return fail("cache input %s has head size %d, but config.json says %d", s.name, d, l.headDim)
				}
				l.headDim = int(d)
			}
			if n := s.shape[lenAxis]; n > 0 {
				return fail("cache input %s has a fixed length %d; the past length must be dynamic", s.name, n)
			}
			l.past = append(l.past, s.name)
		}
	}
	if l.kvHeads <= 0 || l.headDim <= 0 || l.kvHeads > maxHeads || l.headDim > maxHeadDim {
		return fail("the cache's heads (%d) and head size (%d) are neither declared by the graph nor given by config.json", l.kvHeads, l.headDim)
	}

	// Outputs: logits and the present for every past, same form and type.
	presByName := map[string]ioInfo{}
	for _, o := range outs {
		presByName[o.Name] = o
	}
	lg, ok := presByName["logits"]
	if !ok {
		return nil, fmt.Errorf("the graph has no output logits; its outputs are %s", names(outs))
	}
	if lg.Elem != ort.TensorElementDataTypeFloat && lg.Elem != ort.TensorElementDataTypeFloat16 {
		return nil, fmt.Errorf("output logits is %s, not float32 or float16", elemName(lg.Elem))
	}
	if len(lg.Shape) != 3 {
		return nil, fmt.Errorf("output logits has rank %d, expected 3 ([batch, sequence, vocab])", len(lg.Shape))
	}
	l.logits, l.logitsElem = lg.Name, lg.Elem
	for _, p := range l.past {
		want := presentName(p)
		o, ok := presByName[want]
		if !ok {
			return nil, fmt.Errorf("the graph has cache input %s but no output %s; its outputs are %s", p, want, names(outs))
		}
		if o.Elem != l.kvElem {
			return nil, fmt.Errorf("output %s is %s but its past is %s", want, elemName(o.Elem), elemName(l.kvElem))
		}
		if len(o.Shape) != rank {
			return nil, fmt.Errorf("output %s has rank %d, expected %d", want, len(o.Shape), rank)
		}
		l.present = append(l.present, want)
	}
	return l, nil
}

// presentName is the output that returns the cache fed by past.
func presentName(past string) string {
	switch {
	case strings.HasPrefix(past, "past_key_values."):
		return "present." + strings.TrimPrefix(past, "past_key_values.")
	default:
		return "present_" + strings.TrimPrefix(past, "past_")
	}
}

func names(ios []ioInfo) string {
	s := make([]string, len(ios))
	for i, io := range ios {
		s[i] = io.Name
	}
	return strings.Join(s, ", ")
}

func shapeString(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		if d <= 0 {
			parts[i] = "?"
		} else {
			parts[i] = strconv.FormatInt(d, 10)
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

var elemNames = map[ort.TensorElementDataType]string{
	ort.TensorElementDataTypeFloat:   "float32",
	ort.TensorElementDataTypeFloat16: "float16",
	ort.TensorElementDataTypeDouble:  "float64",
	ort.TensorElementDataTypeInt32:   "int32",
	ort.TensorElementDataTypeInt64:   "int64",
	ort.TensorElementDataTypeBool:    "bool",
}

func elemName(e ort.TensorElementDataType) string {
	if n, ok := elemNames[e]; ok {
		return n
	}
	return strings.ToLower(strings.TrimPrefix(e.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_"))
}

// convertInfo takes the binding's description of a graph's inputs or
// outputs; every one must be a tensor.
func convertInfo(kind string, infos []ort.InputOutputInfo) ([]ioInfo, error) {
	out := make([]ioInfo, 0, len(infos))
	for _, in := range infos {
		if in.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("graph %s %q is a %s, not a tensor", kind, in.Name, in.OrtValueType)
		}
		out = append(out, ioInfo{Name: in.Name, Elem: in.DataType, Shape: slices.Clone([]int64(in.Dimensions))})
	}
	return out, nil
}
