package tf2onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	funcpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// Lookup tables. A table filled at load becomes, at each LookupTableFindV2,
// an ai.onnx.ml LabelEncoder holding the pairs (ONNX Runtime runs it for
// string and int64 keys and int64, string and float values; other values,
// vectors and defaults computed in the graph go through a LabelEncoder to
// row numbers and a Gather); LookupTableSizeV2 and LookupTableExportV2
// become constants. What fills a table is found as TensorFlow's loader
// runs it: a HashTableV2's initializer (LookupTableImportV2 or
// InitializeTableV2 of constants, InitializeTableFromTextFileV2 of an
// asset) in the init op, or, for the mutable tables a checkpoint holds
// (MutableHashTableV2, MutableHashTableOfTensorsV2,
// MutableDenseHashTableV2), the LookupTableImportV2 of the saver's restore
// op (TF1's saver graph, TF2's restore function) whose keys and values are
// RestoreV2 outputs: they are read from the variables bundle.

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
	"LookupTableFindV2": true, "LookupTableSizeV2": true, "LookupTableExportV2": true,
	"Identity": true, "IdentityN": true, "StopGradient": true, "Snapshot": true,
}

// tableWriteOps change a table's contents; on a serving path they are
// refused (statefulOps), and a signature that runs one makes the mutable
// tables' checkpoint contents unfit to serve (tableWriter).
var tableWriteOps = map[string]bool{"LookupTableInsertV2": true, "LookupTableRemoveV2": true}

// mutableTableOps are the tables a checkpoint holds.
var mutableTableOps = map[string]bool{"MutableHashTableV2": true, "MutableHashTableOfTensorsV2": true, "MutableDenseHashTableV2": true}

// tableContents are the pairs a table is filled with.
type tableContents struct {
	keys   tensor.Tensor // 1-D, deduplicated
	values tensor.Tensor // [keys, value shape...]
	dense  bool          // a MutableDenseHashTableV2 (its export is its buckets)
	why    string        // why the table cannot be translated, if so
}

// translateHashTable translates HashTableV2 and the mutable tables into a
// handle that only LookupTableFindV2, LookupTableSizeV2 and
// LookupTableExportV2 read.
func (c *converter) translateHashTable(n *node) {
	c.set(n, 0, &value{name: "_table", dtype: tensor.Invalid, rank: 0, table: n.name})
}

// translateTableInit translates the table initializers: they are read at
// translation time (tableContents), so on a serving path they do nothing.
func (c *converter) translateTableInit(n *node) {
	c.set(n, 0, &value{name: "_noop", rank: -1})
}

// initRoots are the nodes a SavedModel runs at load: the saver's restore
// op (which fills the mutable tables from the checkpoint), the TF2 init op
// signature, and the TF1 main-op and table-initializer collections.
func (c *converter) initRoots() []string {
	if c.model == nil || c.model.MetaGraph == nil {
		return nil
	}
	mg := c.model.MetaGraph
	var roots []string
	if r := strings.TrimPrefix(mg.GetSaverDef().GetRestoreOpName(), "^"); r != "" && c.model.Variables != nil {
		name, _, _ := savedmodel.SplitInput(r)
		roots = append(roots, name)
	}
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
		if t := c.g.nodes[name]; t != nil && mutableTableOps[t.op] {
			return &tableContents{why: fmt.Sprintf("table %q is not restored from the checkpoint by the saver's restore op (LookupTableImportV2 of RestoreV2)", name)}
		}
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
		keys, kerr = c.tableInput(init, 1)
		vals, verr = c.tableInput(init, 2)
		if kerr != nil || verr != nil {
			return &tableContents{why: fmt.Sprintf("table %q: its keys and values must be constants or restored from the checkpoint (%v)", name, errors.Join(kerr, verr))}
		}
	}
	t := c.g.nodes[name]
	dense := t != nil && t.op == "MutableDenseHashTableV2"
	if dense && len(keys.Shape) == 2 && keys.Shape[1] == 1 && len(vals.Shape) == 2 {
		// The checkpoint holds the buckets: keys [buckets, key size],
		// values [buckets, value size]; scalar keys are read as a vector
		// and values take the table's value_shape.
		vshape, err := []int64{}, error(nil) // value_shape's default, stripped from TF2 exports
		if a := t.attr["value_shape"]; a != nil {
			vshape, err = savedmodel.ShapeOf(a.GetShape())
		}
		size := int64(1)
		for _, d := range vshape {
			size *= d
		}
		if err != nil || vshape == nil || slices.ContainsFunc(vshape, func(d int64) bool { return d < 0 }) || size != vals.Shape[1] {
			return &tableContents{why: fmt.Sprintf("table %q: its value_shape does not match the checkpoint's values %v", name, vals.Shape)}
		}
		keys.Shape = keys.Shape[:1]
		vals.Shape = append([]int64{vals.Shape[0]}, vshape...)
	}
	if len(keys.Shape) != 1 || len(vals.Shape) < 1 || keys.Shape[0] != vals.Shape[0] {
		return &tableContents{why: fmt.Sprintf("table %q: keys %v and values %v must hold one row per key (tables of vector keys are not translated)", name, keys.Shape, vals.Shape)}
	}
	switch keys.DType {
	case tensor.String, tensor.Int64:
	default:
		return &tableContents{why: fmt.Sprintf("table %q: %s keys are not supported (string and int64 are)", name, keys.DType)}
	}
	if vals.DType == tensor.Invalid {
		return &tableContents{why: fmt.Sprintf("table %q: its values' dtype is not supported", name)}
	}
	for _, t := range []tensor.Tensor{keys, vals} {
		if t.DType == tensor.String && int64(len(t.Strings)) != t.NumElements() ||
			t.DType != tensor.String && int64(len(t.Data)) != t.NumElements()*int64(t.DType.Size()) {
			return &tableContents{why: fmt.Sprintf("table %q: malformed keys or values", name)}
		}
	}
	n := int(keys.NumElements())
	var skip []string // the dense table's empty and deleted keys mark free buckets
	if dense {
		for i := range 2 {
			k, err := c.constInput(t, i)
			if err != nil || k.DType != keys.DType || k.NumElements() != 1 || len(k.Shape) > 1 {
				return &tableContents{why: fmt.Sprintf("table %q: its empty and deleted keys must be constant scalars of the keys' dtype", name)}
			}
			skip = append(skip, elemKey(k, 0))
		}
	}
	// Deduplicate: TensorFlow accepts a key twice with one value and
	// refuses it with two.
	index := map[string]int{}
	var keep []int
	for i := range n {
		k := elemKey(keys, i)
		if slices.Contains(skip, k) {
			continue
		}
		if j, dup := index[k]; dup {
			if elemKey(vals, i) != elemKey(vals, j) {
				return &tableContents{why: fmt.Sprintf("table %q has a key with two values", name)}
			}
			continue
		}
		index[k] = i
		keep = append(keep, i)
	}
	return &tableContents{keys: pick(keys, keep), values: pick(vals, keep), dense: dense}
}

// tableInput reads input i (keys or values) of a table initializer: a
// constant, or a RestoreV2 output read from the variables bundle.
func (c *converter) tableInput(init *node, i int) (tensor.Tensor, error) {
	t, err := c.constInput(init, i)
	if err == nil || i >= len(init.inputs) {
		return t, err
	}
	r, rerr := c.g.resolve(init.inputs[i])
	for hops := 0; rerr == nil && hops < 8; hops++ {
		d := c.g.nodes[r.node]
		if d.op != "Identity" || len(d.inputs) == 0 {
			break
		}
		r, rerr = c.g.resolve(d.inputs[0])
	}
	if rerr != nil {
		return t, err
	}
	d := c.g.nodes[r.node]
	if d.op != "RestoreV2" {
		return t, err
	}
	names, nerr := c.constInput(d, 1)
	slicesT, serr := c.constInput(d, 2)
	if nerr != nil || serr != nil || names.DType != tensor.String || r.idx >= len(names.Strings) {
		return t, fmt.Errorf("%q: its tensor names are not constants", d.name)
	}
	if slicesT.DType == tensor.String && r.idx < len(slicesT.Strings) && len(slicesT.Strings[r.idx]) > 0 {
		return t, fmt.Errorf("%q restores a slice (%q) of %q", d.name, slicesT.Strings[r.idx], names.Strings[r.idx])
	}
	key := string(names.Strings[r.idx])
	if c.model.Variables == nil || !c.model.Variables.Has(key) {
		return t, fmt.Errorf("the checkpoint (variables/variables.index) has no %q", key)
	}
	return c.model.Variables.Read(key)
}

// tableWriter names a signature of the model that writes a lookup table
// when served (LookupTableInsertV2 or LookupTableRemoveV2 on its path,
// in its functions too), or "" when none does: a mutable table's
// checkpoint contents then stay what it holds.
func (c *converter) tableWriter() string {
	if c.writer != nil {
		return *c.writer
	}
	w := ""
	c.writer = &w
	mg := c.model.MetaGraph
	lib := map[string]*funcpb.FunctionDef{}
	for _, f := range mg.GetGraphDef().GetLibrary().GetFunction() {
		lib[f.GetSignature().GetName()] = f
	}
	writes := map[string]bool{} // by function, once decided
	var fnWrites func(name string, depth int) bool
	fnWrites = func(name string, depth int) bool {
		if v, ok := writes[name]; ok || depth > maxInlineDepth {
			return v
		}
		writes[name] = false // a recursive call adds nothing
		f := lib[name]
		for _, nd := range f.GetNodeDef() {
			if tableWriteOps[nd.Op] || calledWrites(nd.Attr, func(fn string) bool { return fnWrites(fn, depth+1) }) {
				writes[name] = true
				break
			}
		}
		return writes[name]
	}
	nodes := map[string]*nodepb.NodeDef{}
	for _, nd := range mg.GetGraphDef().GetNode() {
		nodes[nd.Name] = nd
	}
	for _, sig := range sortedKeys(mg.SignatureDef) {
		if sig == "__saved_model_init_op" {
			continue
		}
		var work []string
		for _, ti := range mg.SignatureDef[sig].Outputs {
			name, _, _ := savedmodel.SplitInput(ti.GetName())
			work = append(work, name)
		}
		seen := map[string]bool{}
		for len(work) > 0 && w == "" {
			name := work[len(work)-1]
			work = work[:len(work)-1]
			nd := nodes[name]
			if nd == nil || seen[name] {
				continue
			}
			seen[name] = true
			if tableWriteOps[nd.Op] || calledWrites(nd.Attr, func(fn string) bool { return fnWrites(fn, 0) }) {
				w = sig
			}
			for _, in := range nd.Input {
				n, _, _ := savedmodel.SplitInput(in)
				work = append(work, n)
			}
		}
		if w != "" {
			break
		}
	}
	return w
}

// calledWrites reports whether a function an attribute names (a call's f,
// a loop's body, a branch) writes a table.
func calledWrites(attrs map[string]*attrpb.AttrValue, writes func(string) bool) bool {
	for _, a := range attrs {
		if f := a.GetFunc(); f != nil && writes(f.GetName()) {
			return true
		}
		for _, f := range a.GetList().GetFunc() {
			if writes(f.GetName()) {
				return true
			}
		}
	}
	return false
}

// rowSize is the number of elements in one row of t (its first dimension
// indexing rows).
func rowSize(t tensor.Tensor) int {
	n := 1
	if len(t.Shape) < 2 {
		return n
	}
	for _, d := range t.Shape[1:] {
		n *= int(d)
	}
	return n
}

// elemKey is row i of t, as a comparable string.
func elemKey(t tensor.Tensor, i int) string {
	r := rowSize(t)
	if t.DType == tensor.String {
		if r == 1 {
			return string(t.Strings[i])
		}
		var b []byte
		for _, s := range t.Strings[i*r : (i+1)*r] {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		return string(b)
	}
	sz := int(t.DType.Size()) * r
	return string(t.Data[i*sz : (i+1)*sz])
}

// pick keeps rows idx of t.
func pick(t tensor.Tensor, idx []int) tensor.Tensor {
	out := tensor.Tensor{DType: t.DType, Shape: []int64{int64(len(idx))}}
	if len(t.Shape) > 1 {
		out.Shape = append(out.Shape, t.Shape[1:]...)
	}
	r := rowSize(t)
	if t.DType == tensor.String {
		for _, i := range idx {
			out.Strings = append(out.Strings, t.Strings[i*r:(i+1)*r]...)
		}
		return out
	}
	sz := int(t.DType.Size()) * r
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
		c.unsupported(n, "the table is not a HashTableV2 filled at load or a mutable table restored from the checkpoint")
		return nil
	}
	if t := c.g.nodes[h.table]; t != nil && mutableTableOps[t.op] {
		if w := c.tableWriter(); w != "" {
			c.unsupported(n, fmt.Sprintf("signature %q writes lookup tables when served (LookupTableInsertV2 or LookupTableRemoveV2): "+
				"a mutable table is translated with its checkpoint contents, which would not follow the writes; serve the model with runtime libtensorflow", w))
			return nil
		}
	}
	tc := c.contents(h.table)
	if tc.why != "" {
		c.unsupported(n, tc.why)
		return nil
	}
	return tc
}

// lookupTableFind translates LookupTableFindV2: a LabelEncoder from keys
// to values, or, for rows of values, a non-constant default or values a
// LabelEncoder cannot hold, a LabelEncoder from keys to row numbers (the
// default's row last) and a Gather.
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
	dv := c.in(n, 2)
	if dv.dtype != tc.values.DType {
		c.unsupported(n, "the default value must have the values' dtype")
		return
	}
	def := dv.konst
	vshape := tc.values.Shape[1:]
	if def != nil && def.NumElements() != int64(rowSize(tc.values)) {
		c.unsupported(n, fmt.Sprintf("the default value's shape %v is not the values' %v", def.Shape, vshape))
		return
	}
	v := &value{dtype: tc.values.DType, rank: -1}
	if x.rank >= 0 {
		v.rank = x.rank + len(vshape)
	}
	direct := len(vshape) == 0 && def != nil
	switch tc.values.DType {
	case tensor.String, tensor.Int64, tensor.Float32:
	default:
		direct = false
	}
	if tc.keys.NumElements() == 0 {
		// Every key is absent: the default, broadcast to x's shape.
		d := dv.name
		if def != nil {
			dd := *def
			dd.Shape = slices.Clone(vshape)
			d = c.Constant(dd)
		}
		shape := c.Op1("Shape", x.name)
		if len(vshape) > 0 {
			shape = c.Op1("Concat", shape, c.I64Const(vshape), onnxbuild.AttrInt("axis", 0))
		}
		v.name = c.Op1("Expand", d, shape)
		c.set(n, 0, v)
		return
	}
	if !direct {
		nk := tc.keys.Shape[0]
		rows := make([]int64, nk)
		for i := range rows {
			rows[i] = int64(i)
		}
		idx := c.labelEncoder(x.name, tc.keys, tensor.FromInt64("", []int64{nk}, rows), onnxbuild.AttrInt("default_int64", nk))
		d := dv.name
		if def != nil {
			dd := *def
			dd.Shape = slices.Clone(vshape)
			d = c.Constant(dd)
		} else {
			// A computed default must have the values' shape, as
			// TensorFlow checks.
			d = c.Op1("Reshape", d, c.I64Const(vshape))
		}
		table := c.Op1("Concat", c.Constant(tc.values), c.Op1("Unsqueeze", d, c.I64Const([]int64{0})), onnxbuild.AttrInt("axis", 0))
		v.name = c.Op1("Gather", table, idx, onnxbuild.AttrInt("axis", 0))
		c.set(n, 0, v)
		return
	}
	var dattr *onnxpb.AttributeProto
	switch def.DType {
	case tensor.Int64:
		d, err := def.AsInt64()
		if err != nil || len(d) != 1 {
			c.unsupported(n, "bad default value")
			return
		}
		dattr = onnxbuild.AttrInt("default_int64", d[0])
	case tensor.Float32:
		d, err := def.AsFloat32()
		if err != nil || len(d) != 1 {
			c.unsupported(n, "bad default value")
			return
		}
		dattr = onnxbuild.AttrFloat("default_float", d[0])
	case tensor.String:
		dattr = &onnxpb.AttributeProto{Name: "default_string", Type: onnxpb.AttributeProto_STRING, S: def.Strings[0]}
	}
	v.name = c.labelEncoder(x.name, tc.keys, tc.values, dattr)
	c.set(n, 0, v)
}

// labelEncoder emits an ai.onnx.ml LabelEncoder mapping keys to values.
func (c *converter) labelEncoder(x string, keys, values tensor.Tensor, def *onnxpb.AttributeProto) string {
	out := c.Fresh("v")
	c.Nodes = append(c.Nodes, &onnxpb.NodeProto{OpType: "LabelEncoder", Domain: MLDomain, Name: c.Fresh("LabelEncoder"),
		Input: []string{x}, Output: []string{out}, Attribute: []*onnxpb.AttributeProto{tableAttr("keys", keys), tableAttr("values", values), def}})
	c.usesML = true
	return out
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

// lookupTableExport translates LookupTableExportV2: the table's keys and
// values, in the order the checkpoint or initializer holds them
// (TensorFlow's order is its hash map's, unspecified). A dense table
// exports its buckets, free ones included, which are not kept: refused.
func (c *converter) lookupTableExport(n *node) {
	tc := c.tableOf(n)
	if tc == nil {
		return
	}
	if tc.dense {
		c.unsupported(n, "a MutableDenseHashTableV2 exports its buckets (empty ones included), which the translation does not keep")
		return
	}
	c.set(n, 0, c.constValue(tc.keys))
	c.set(n, 1, c.constValue(tc.values))
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
