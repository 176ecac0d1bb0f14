package tf2onnx

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// Lookup tables. A HashTableV2 filled at load by LookupTableImportV2 or
// InitializeTableV2 from constant keys and values becomes, at each
// LookupTableFindV2, an ai.onnx.ml LabelEncoder holding the pairs (ONNX
// Runtime runs it for string and int64 keys and int64, string and float
// values); LookupTableSizeV2 becomes a constant.

// MLDomain is the ONNX-ML operator domain, imported at MLOpset when a
// translated model uses LabelEncoder.
const (
	MLDomain = "ai.onnx.ml"
	MLOpset  = 2
)

// tableInitOps fill a table from key and value tensors.
var tableInitOps = map[string]bool{"LookupTableImportV2": true, "InitializeTableV2": true, "InitializeTableFromTextFileV2": true}

// tableReaders are the ops that may read a table handle.
var tableReaders = map[string]bool{
	"LookupTableFindV2": true, "LookupTableSizeV2": true,
	"Identity": true, "IdentityN": true, "StopGradient": true, "Snapshot": true,
}

// tableContents are the pairs a table is filled with.
type tableContents struct {
	keys, values tensor.Tensor // 1-D, deduplicated
	why          string        // why the table cannot be translated, if so
}

// translateHashTable translates HashTableV2 into a handle that only
// LookupTableFindV2 and LookupTableSizeV2 read.
func (c *converter) translateHashTable(n *node) {
	c.set(n, 0, &value{name: "_table", dtype: tensor.Invalid, rank: 0, table: n.name})
}

// translateTableInit translates the table initializers: they are read at
// translation time (tableContents), so on a serving path they do nothing.
func (c *converter) translateTableInit(n *node) {
	c.set(n, 0, &value{name: "_noop", rank: -1})
}

// initRoots are the nodes a SavedModel runs at load: the TF2 init op
// signature, and the TF1 main-op and table-initializer collections.
func (c *converter) initRoots() []string {
	if c.model == nil || c.model.MetaGraph == nil {
		return nil
	}
	mg := c.model.MetaGraph
	var roots []string
	if sd := mg.SignatureDef["__saved_model_init_op"]; sd != nil {
		for _, k := range sortedKeys(sd.Outputs) {
			name, _, _ := savedmodel.SplitInput(sd.Outputs[k].GetName())
			roots = append(roots, name)
		}
	}
	for _, k := range []string{"saved_model_main_op", "legacy_init_op", "table_initializer", "init_op"} {
		for _, v := range mg.CollectionDef[k].GetNodeList().GetValue() {
			name, _, _ := savedmodel.SplitInput(v)
			roots = append(roots, name)
		}
	}
	return roots
}

// findTableInits walks what the SavedModel runs at load, inlining the
// functions it calls, and records every table initializer by the table
// node it fills.
func (c *converter) findTableInits() {
	if c.tableInits != nil {
		return
	}
	c.tableInits = map[string][]*node{}
	seen := map[string]bool{}
	work := c.initRoots()
	for len(work) > 0 {
		name := work[len(work)-1]
		work = work[:len(work)-1]
		n := c.g.nodes[name]
		if n == nil || seen[name] {
			continue
		}
		seen[name] = true
		if callOps[n.op] || n.op == "_Inlined" {
			if n.depth >= maxInlineDepth {
				continue
			}
			body, err := c.g.inlineBody(n)
			if err != nil {
				continue // the table it fills is refused below
			}
			work = append(work, body...)
		}
		if tableInitOps[n.op] && len(n.inputs) >= 2 {
			if t, err := c.g.resolve(n.inputs[0]); err == nil {
				c.tableInits[t.node] = append(c.tableInits[t.node], n)
			}
		}
		work = append(work, n.ctrl...)
		for _, in := range n.inputs {
			work = append(work, in.node)
		}
	}
}

// contents returns what table node name is filled with.
func (c *converter) contents(name string) *tableContents {
	if tc, ok := c.tables[name]; ok {
		return tc
	}
	tc := c.readContents(name)
	if c.tables == nil {
		c.tables = map[string]*tableContents{}
	}
	c.tables[name] = tc
	return tc
}

func (c *converter) readContents(name string) *tableContents {
	c.findTableInits()
	inits := c.tableInits[name]
	switch len(inits) {
	case 0:
		return &tableContents{why: fmt.Sprintf("table %q is not filled by a LookupTableImportV2 or InitializeTableV2 the SavedModel runs at load", name)}
	case 1:
	default:
		return &tableContents{why: fmt.Sprintf("table %q is filled by %d initializers", name, len(inits))}
	}
	init := inits[0]
	var keys, vals tensor.Tensor
	if init.op == "InitializeTableFromTextFileV2" {
		var err error
		if keys, vals, err = c.readVocabulary(c.g.nodes[name], init); err != nil {
			return &tableContents{why: fmt.Sprintf("table %q: %v", name, err)}
		}
	} else {
		var kerr, verr error
		keys, kerr = c.constInput(init, 1)
		vals, verr = c.constInput(init, 2)
		if kerr != nil || verr != nil {
			return &tableContents{why: fmt.Sprintf("table %q: its keys and values must be constants", name)}
		}
	}
	if len(keys.Shape) != 1 || len(vals.Shape) != 1 || keys.Shape[0] != vals.Shape[0] {
		return &tableContents{why: fmt.Sprintf("table %q: keys %v and values %v must be vectors of one length (tables of vector values are not translated)", name, keys.Shape, vals.Shape)}
	}
	switch keys.DType {
	case tensor.String, tensor.Int64:
	default:
		return &tableContents{why: fmt.Sprintf("table %q: %s keys are not supported (string and int64 are)", name, keys.DType)}
	}
	switch vals.DType {
	case tensor.String, tensor.Int64, tensor.Float32:
	default:
		return &tableContents{why: fmt.Sprintf("table %q: %s values are not supported (int64, string and float are)", name, vals.DType)}
	}
	for _, t := range []tensor.Tensor{keys, vals} {
		if t.DType == tensor.String && int64(len(t.Strings)) != t.NumElements() ||
			t.DType != tensor.String && int64(len(t.Data)) != t.NumElements()*int64(t.DType.Size()) {
			return &tableContents{why: fmt.Sprintf("table %q: malformed keys or values", name)}
		}
	}
	// Deduplicate: TensorFlow accepts a key twice with one value and
	// refuses it with two.
	n := int(keys.NumElements())
	index := map[string]int{}
	var keep []int
	for i := range n {
		k := elemKey(keys, i)
		if j, dup := index[k]; dup {
			if elemKey(vals, i) != elemKey(vals, j) {
				return &tableContents{why: fmt.Sprintf("table %q has a key with two values", name)}
			}
			continue
		}
		index[k] = i
		keep = append(keep, i)
	}
	return &tableContents{keys: pick(keys, keep), values: pick(vals, keep)}
}

// elemKey is element i of a 1-D tensor, as a comparable string.
func elemKey(t tensor.Tensor, i int) string {
	if t.DType == tensor.String {
		return string(t.Strings[i])
	}
	sz := int(t.DType.Size())
	return string(t.Data[i*sz : (i+1)*sz])
}

// pick keeps elements idx of a 1-D tensor.
func pick(t tensor.Tensor, idx []int) tensor.Tensor {
	out := tensor.Tensor{DType: t.DType, Shape: []int64{int64(len(idx))}}
	if t.DType == tensor.String {
		for _, i := range idx {
			out.Strings = append(out.Strings, t.Strings[i])
		}
		return out
	}
	sz := int(t.DType.Size())
	for _, i := range idx {
		out.Data = append(out.Data, t.Data[i*sz:(i+1)*sz]...)
	}
	return out
}

// constInput reads input i of n as a constant without translating it.
func (c *converter) constInput(n *node, i int) (tensor.Tensor, error) {
	if i >= len(n.inputs) {
		return tensor.Tensor{}, fmt.Errorf("no input %d", i)
	}
	r := n.inputs[i]
	for hops := 0; hops < 64; hops++ {
		rr, err := c.g.resolve(r)
		if err != nil {
			return tensor.Tensor{}, err
		}
		d := c.g.nodes[rr.node]
		switch {
		case d.op == "Const" && rr.idx == 0:
			return savedmodel.TensorFromProto(d.attr["value"].GetTensor())
		case (d.op == "Identity" || d.op == "StopGradient") && len(d.inputs) == 1:
			r = d.inputs[0]
		case d.op == "Cast" && len(d.inputs) == 1:
			// A vocabulary list's ids: Cast(Range(...)).
			t, err := c.constInput(d, 0)
			if err != nil {
				return t, err
			}
			out, ok := castTensor(t, d.dtype("DstT", tensor.Invalid))
			if !ok {
				return t, fmt.Errorf("%q casts %s", d.name, t.DType)
			}
			return out, nil
		case d.op == "Range" && len(d.inputs) == 3:
			var lim [3]int64
			for j := range lim {
				t, err := c.constInput(d, j)
				v, ok := ints(&t)
				if err != nil || !ok || len(v) != 1 {
					return tensor.Tensor{}, fmt.Errorf("%q is a Range of non-constant integers", d.name)
				}
				lim[j] = v[0]
			}
			if lim[2] <= 0 || lim[1]-lim[0] > maxFold*16 {
				return tensor.Tensor{}, fmt.Errorf("%q: Range(%d, %d, %d) is not folded", d.name, lim[0], lim[1], lim[2])
			}
			var v []int64
			for x := lim[0]; x < lim[1]; x += lim[2] {
				v = append(v, x)
			}
			out := tensor.FromInt64("", []int64{int64(len(v))}, v)
			if dt := d.dtype("Tidx", tensor.Int32); dt == tensor.Int32 {
				out, _ = castTensor(out, tensor.Int32)
			}
			return out, nil
		default:
			return tensor.Tensor{}, fmt.Errorf("%q is a %s", d.name, d.op)
		}
	}
	return tensor.Tensor{}, fmt.Errorf("identity chain too long")
}

// tableOf returns the contents of the table input 0 of n reads, or
// refuses n and returns nil.
func (c *converter) tableOf(n *node) *tableContents {
	h := c.in(n, 0)
	if h.table == "" {
		c.unsupported(n, "the table is not a HashTableV2 filled from constants at load")
		return nil
	}
	tc := c.contents(h.table)
	if tc.why != "" {
		c.unsupported(n, tc.why)
		return nil
	}
	return tc
}

// lookupTableFind translates LookupTableFindV2 into a LabelEncoder.
func (c *converter) lookupTableFind(n *node) {
	tc := c.tableOf(n)
	if tc == nil {
		return
	}
	x := c.in(n, 1)
	if x.dtype != tc.keys.DType {
		c.unsupported(n, fmt.Sprintf("%s keys looked up in a table of %s keys", x.dtype, tc.keys.DType))
		return
	}
	def := c.in(n, 2).konst
	if def == nil || def.DType != tc.values.DType || def.NumElements() != 1 {
		c.unsupported(n, "the default value must be a constant scalar of the values' dtype")
		return
	}
	v := &value{dtype: tc.values.DType, rank: x.rank}
	if tc.keys.NumElements() == 0 {
		d := *def
		d.Shape = []int64{}
		v.name = c.Op1("Expand", c.Constant(d), c.Op1("Shape", x.name))
		c.set(n, 0, v)
		return
	}
	attrs := []*onnxpb.AttributeProto{tableAttr("keys", tc.keys), tableAttr("values", tc.values)}
	switch def.DType {
	case tensor.Int64:
		d, err := def.AsInt64()
		if err != nil || len(d) != 1 {
			c.unsupported(n, "bad default value")
			return
		}
		attrs = append(attrs, onnxbuild.AttrInt("default_int64", d[0]))
	case tensor.Float32:
		d, err := def.AsFloat32()
		if err != nil || len(d) != 1 {
			c.unsupported(n, "bad default value")
			return
		}
		attrs = append(attrs, onnxbuild.AttrFloat("default_float", d[0]))
	case tensor.String:
		attrs = append(attrs, &onnxpb.AttributeProto{Name: "default_string", Type: onnxpb.AttributeProto_STRING, S: def.Strings[0]})
	}
	v.name = c.Fresh("v")
	c.Nodes = append(c.Nodes, &onnxpb.NodeProto{OpType: "LabelEncoder", Domain: MLDomain, Name: c.Fresh("LabelEncoder"),
		Input: []string{x.name}, Output: []string{v.name}, Attribute: attrs})
	c.usesML = true
	c.set(n, 0, v)
}

// tableAttr is LabelEncoder's keys_* or values_* attribute holding t.
func tableAttr(prefix string, t tensor.Tensor) *onnxpb.AttributeProto {
	switch t.DType {
	case tensor.String:
		return &onnxpb.AttributeProto{Name: prefix + "_strings", Type: onnxpb.AttributeProto_STRINGS, Strings: slices.Clone(t.Strings)}
	case tensor.Float32:
		f, _ := t.AsFloat32() // checked by readContents
		return &onnxpb.AttributeProto{Name: prefix + "_floats", Type: onnxpb.AttributeProto_FLOATS, Floats: f}
	}
	v, _ := t.AsInt64() // checked by readContents
	return onnxbuild.AttrInts(prefix+"_int64s", v)
}

// lookupTableSize translates LookupTableSizeV2: the number of keys.
func (c *converter) lookupTableSize(n *node) {
	tc := c.tableOf(n)
	if tc == nil {
		return
	}
	c.set(n, 0, c.constValue(tensor.FromInt64("", []int64{}, []int64{tc.keys.Shape[0]})))
}

// withMLOpset appends the ai.onnx.ml opset import to a serialized
// ModelProto (repeated fields may come in any number of pieces).
func withMLOpset(model []byte) ([]byte, error) {
	b, err := proto.Marshal(&onnxpb.OperatorSetIdProto{Domain: MLDomain, Version: MLOpset})
	if err != nil {
		return nil, err
	}
	model = protowire.AppendTag(model, 8, protowire.BytesType)
	return protowire.AppendBytes(model, b), nil
}
