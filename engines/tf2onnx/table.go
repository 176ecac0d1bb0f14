package tf2onnx

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

// The supported-ops section of processors/tensorflow/README.md is written
// from opTable; TestOpsDoc fails when it is out of date.
//go:generate go run ./internal/opsdoc -readme ../../processors/tensorflow/README.md

// translator emits the ONNX nodes for one TensorFlow node and records its
// outputs with c.set. A node it cannot translate (an attribute or a
// non-constant input outside what ONNX expresses) goes to c.unsupported with
// the reason; a malformed graph goes to c.fail.
type translator func(c *converter, n *node)

// opGroup orders and titles the ops in the documentation.
type opGroup int

const (
	groupGraph opGroup = iota
	groupMath
	groupActivation
	groupCompare
	groupMatrix
	groupNN
	groupReduce
	groupArray
	groupImage
	groupExample
	groupStrings
	groupSparse
	groupControl
)

var groupTitles = [...]string{
	groupGraph:      "Graph structure and variables",
	groupMath:       "Arithmetic and math",
	groupActivation: "Activations",
	groupCompare:    "Comparison, logic and selection",
	groupMatrix:     "Matrix products",
	groupNN:         "Convolution, pooling and normalization",
	groupReduce:     "Reductions",
	groupArray:      "Shapes, slicing and indexing",
	groupImage:      "Images",
	groupExample:    "tf.Example parsing",
	groupStrings:    "Feature columns: strings (run in Go before the model), lookup tables, buckets",
	groupSparse:     "Sparse tensors and embeddings",
	groupControl:    "Control flow",
}

// opEntry is one TensorFlow op the translation handles.
type opEntry struct {
	translate translator
	group     opGroup
	note      string // limits shown in the docs after the op name
}

// opTable maps each TensorFlow op type the translation handles to its
// translator. Ops absent from it are refused (see refuse).
var opTable = map[string]opEntry{
	// Graph structure and variables.
	"Const":                  {(*converter).translateConst, groupGraph, ""},
	"Identity":               {hostAware((*converter).translateIdentity), groupGraph, ""},
	"StopGradient":           {hostAware((*converter).translateIdentity), groupGraph, ""},
	"Snapshot":               {hostAware((*converter).translateIdentity), groupGraph, ""},
	"PreventGradient":        {hostAware((*converter).translateIdentity), groupGraph, ""},
	"CheckNumerics":          {hostAware((*converter).translateIdentity), groupGraph, ""},
	"EnsureShape":            {hostAware((*converter).translateIdentity), groupGraph, ""},
	"PlaceholderWithDefault": {(*converter).translateIdentity, groupGraph, ""},
	"IdentityN":              {(*converter).translateIdentityN, groupGraph, ""},
	"NoOp":                   {(*converter).translateNoOp, groupGraph, ""},
	"Placeholder":            {(*converter).translatePlaceholder, groupGraph, "as a signature input"},
	"VariableV2":             {(*converter).translateVariable, groupGraph, ""},
	"Variable":               {(*converter).translateVariable, groupGraph, ""},
	"VarHandleOp":            {(*converter).translateVariable, groupGraph, ""},
	"ReadVariableOp":         {(*converter).translateReadVariableOp, groupGraph, ""},

	// Arithmetic and math.
	"Add":               {binaryOp("Add", false), groupMath, ""},
	"AddV2":             {binaryOp("Add", false), groupMath, ""},
	"Sub":               {binaryOp("Sub", false), groupMath, ""},
	"Mul":               {binaryOp("Mul", false), groupMath, ""},
	"RealDiv":           {binaryOp("Div", false), groupMath, ""},
	"Div":               {binaryOp("Div", false), groupMath, ""},
	"TruncateDiv":       {binaryOp("Div", false), groupMath, ""},
	"Maximum":           {binaryOp("Max", false), groupMath, ""},
	"Minimum":           {binaryOp("Min", false), groupMath, ""},
	"Pow":               {binaryOp("Pow", false), groupMath, ""},
	"BiasAdd":           {(*converter).translateBiasAdd, groupMath, "NHWC, NCHW"},
	"BiasAddV1":         {(*converter).translateBiasAdd, groupMath, "NHWC, NCHW"},
	"AddN":              {(*converter).translateAddN, groupMath, ""},
	"DivNoNan":          {(*converter).translateDivNoNan, groupMath, ""},
	"FloorDiv":          {(*converter).translateFloorDiv, groupMath, "float"},
	"FloorMod":          {(*converter).translateFloorMod, groupMath, "integer"},
	"Square":            {(*converter).translateSquare, groupMath, ""},
	"SquaredDifference": {(*converter).translateSquaredDifference, groupMath, ""},
	"Rsqrt":             {(*converter).translateRsqrt, groupMath, ""},
	"Sqrt":              {unaryOp("Sqrt", false), groupMath, ""},
	"Reciprocal":        {unaryOp("Reciprocal", false), groupMath, ""},
	"Inv":               {unaryOp("Reciprocal", false), groupMath, ""},
	"Neg":               {unaryOp("Neg", false), groupMath, ""},
	"Abs":               {unaryOp("Abs", false), groupMath, ""},
	"Sign":              {unaryOp("Sign", false), groupMath, ""},
	"Floor":             {unaryOp("Floor", false), groupMath, ""},
	"Ceil":              {unaryOp("Ceil", false), groupMath, ""},
	"Round":             {unaryOp("Round", false), groupMath, ""},
	"Exp":               {unaryOp("Exp", false), groupMath, ""},
	"Log":               {unaryOp("Log", false), groupMath, ""},
	"Log1p":             {(*converter).translateLog1pExpm1, groupMath, ""},
	"Expm1":             {(*converter).translateLog1pExpm1, groupMath, ""},
	"Erf":               {unaryOp("Erf", false), groupMath, ""},
	"Erfc":              {(*converter).translateErfc, groupMath, "as 1 - Erf"},
	"Sin":               {unaryOp("Sin", false), groupMath, ""},
	"Cos":               {unaryOp("Cos", false), groupMath, ""},
	"Tan":               {unaryOp("Tan", false), groupMath, ""},
	"Asin":              {unaryOp("Asin", false), groupMath, ""},
	"Acos":              {unaryOp("Acos", false), groupMath, ""},
	"Atan":              {unaryOp("Atan", false), groupMath, ""},
	"Sinh":              {unaryOp("Sinh", false), groupMath, ""},
	"Cosh":              {unaryOp("Cosh", false), groupMath, ""},
	"Asinh":             {unaryOp("Asinh", false), groupMath, ""},
	"Acosh":             {unaryOp("Acosh", false), groupMath, ""},
	"Atanh":             {unaryOp("Atanh", false), groupMath, ""},
	"Cast":              {hostCast((*converter).translateCast), groupMath, ""},
	"ClipByValue":       {(*converter).translateClipByValue, groupMath, ""},
	"Cumsum":            {(*converter).translateCumsum, groupMath, ""},

	// Activations.
	"Relu":       {unaryOp("Relu", false), groupActivation, ""},
	"Relu6":      {(*converter).translateRelu6, groupActivation, ""},
	"Elu":        {unaryOp("Elu", false), groupActivation, ""},
	"Selu":       {unaryOp("Selu", false), groupActivation, ""},
	"Sigmoid":    {unaryOp("Sigmoid", false), groupActivation, ""},
	"Tanh":       {unaryOp("Tanh", false), groupActivation, ""},
	"Softplus":   {unaryOp("Softplus", false), groupActivation, ""},
	"Softsign":   {unaryOp("Softsign", false), groupActivation, ""},
	"LeakyRelu":  {(*converter).translateLeakyRelu, groupActivation, ""},
	"Softmax":    {(*converter).translateSoftmax, groupActivation, ""},
	"LogSoftmax": {(*converter).translateSoftmax, groupActivation, ""},

	// Comparison, logic and selection.
	"Equal":        {hostAware(binaryOp("Equal", true)), groupCompare, ""},
	"NotEqual":     {hostAware((*converter).translateNotEqual), groupCompare, ""},
	"Less":         {binaryOp("Less", true), groupCompare, ""},
	"LessEqual":    {binaryOp("LessOrEqual", true), groupCompare, ""},
	"Greater":      {binaryOp("Greater", true), groupCompare, ""},
	"GreaterEqual": {binaryOp("GreaterOrEqual", true), groupCompare, ""},
	"LogicalAnd":   {binaryOp("And", true), groupCompare, ""},
	"LogicalOr":    {binaryOp("Or", true), groupCompare, ""},
	"LogicalNot":   {unaryOp("Not", true), groupCompare, ""},
	"IsNan":        {unaryOp("IsNaN", true), groupCompare, ""},
	"IsInf":        {unaryOp("IsInf", true), groupCompare, ""},
	"Select":       {(*converter).translateSelect, groupCompare, ""},
	"SelectV2":     {(*converter).translateSelect, groupCompare, ""},
	"Where":        {hostAware((*converter).translateWhere), groupCompare, ""},

	// Matrix products.
	"MatMul":        {(*converter).translateMatMul, groupMatrix, ""},
	"BatchMatMul":   {(*converter).translateBatchMatMul, groupMatrix, ""},
	"BatchMatMulV2": {(*converter).translateBatchMatMul, groupMatrix, ""},
	"BatchMatMulV3": {(*converter).translateBatchMatMul, groupMatrix, ""},
	"Einsum":        {(*converter).translateEinsum, groupMatrix, ""},

	// Convolution, pooling and normalization.
	"Conv2D":                {func(c *converter, n *node) { c.conv2D(n, false) }, groupNN, "SAME, VALID, EXPLICIT"},
	"DepthwiseConv2dNative": {func(c *converter, n *node) { c.conv2D(n, true) }, groupNN, ""},
	"Conv2DBackpropInput":   {(*converter).conv2DTranspose, groupNN, ""},
	"MaxPool":               {(*converter).pool, groupNN, ""},
	"AvgPool":               {(*converter).pool, groupNN, ""},
	"FusedBatchNorm":        {(*converter).batchNorm, groupNN, "inference"},
	"FusedBatchNormV2":      {(*converter).batchNorm, groupNN, "inference"},
	"FusedBatchNormV3":      {(*converter).batchNorm, groupNN, "inference"},

	// Reductions.
	"Mean":   {reduceOp("ReduceMean"), groupReduce, ""},
	"Sum":    {reduceOp("ReduceSum"), groupReduce, ""},
	"Max":    {reduceOp("ReduceMax"), groupReduce, ""},
	"Min":    {reduceOp("ReduceMin"), groupReduce, ""},
	"Prod":   {reduceOp("ReduceProd"), groupReduce, ""},
	"All":    {(*converter).translateAllAny, groupReduce, ""},
	"Any":    {(*converter).translateAllAny, groupReduce, ""},
	"ArgMax": {(*converter).translateArgMinMax, groupReduce, ""},
	"ArgMin": {(*converter).translateArgMinMax, groupReduce, ""},
	"TopKV2": {(*converter).translateTopKV2, groupReduce, ""},

	// Shapes, slicing and indexing.
	"Reshape":        {hostAware((*converter).translateReshape), groupArray, ""},
	"Shape":          {hostAware((*converter).translateShape), groupArray, ""},
	"Size":           {hostAware((*converter).translateShape), groupArray, ""},
	"Rank":           {(*converter).translateShape, groupArray, ""},
	"Squeeze":        {hostAware((*converter).translateSqueeze), groupArray, ""},
	"ExpandDims":     {hostAware((*converter).translateExpandDims), groupArray, ""},
	"Transpose":      {(*converter).translateTranspose, groupArray, ""},
	"Concat":         {(*converter).translateConcat, groupArray, ""},
	"ConcatV2":       {(*converter).translateConcat, groupArray, ""},
	"Pack":           {(*converter).translatePack, groupArray, ""},
	"Unpack":         {(*converter).translateUnpack, groupArray, ""},
	"Split":          {(*converter).translateSplit, groupArray, ""},
	"SplitV":         {(*converter).translateSplitV, groupArray, ""},
	"Slice":          {(*converter).translateSlice, groupArray, ""},
	"StridedSlice":   {(*converter).stridedSlice, groupArray, "all masks"},
	"Tile":           {(*converter).translateTile, groupArray, ""},
	"Fill":           {(*converter).translateFill, groupArray, ""},
	"Range":          {(*converter).translateRange, groupArray, ""},
	"ZerosLike":      {(*converter).translateZerosOnesLike, groupArray, ""},
	"OnesLike":       {(*converter).translateZerosOnesLike, groupArray, ""},
	"BroadcastTo":    {(*converter).translateBroadcastTo, groupArray, ""},
	"ReverseV2":      {(*converter).translateReverseV2, groupArray, ""},
	"Pad":            {(*converter).translatePad, groupArray, ""},
	"PadV2":          {(*converter).translatePad, groupArray, ""},
	"MirrorPad":      {(*converter).translatePad, groupArray, "REFLECT"},
	"OneHot":         {(*converter).translateOneHot, groupArray, ""},
	"Gather":         {(*converter).translateGather, groupArray, ""},
	"GatherV2":       {(*converter).translateGather, groupArray, ""},
	"ResourceGather": {(*converter).translateGather, groupArray, ""},
	"GatherNd":       {hostAware((*converter).translateGatherNd), groupArray, ""},
	"SpaceToDepth":   {(*converter).translateSpaceDepth, groupArray, ""},
	"Unique":         {(*converter).translateUnique, groupArray, ""},

	// Sparse tensors and segment reductions.
	"SparseSegmentSum":                  {(*converter).segmentReduce, groupSparse, ""},
	"SparseSegmentMean":                 {(*converter).segmentReduce, groupSparse, ""},
	"SparseSegmentSqrtN":                {(*converter).segmentReduce, groupSparse, ""},
	"SparseSegmentSumWithNumSegments":   {(*converter).segmentReduce, groupSparse, ""},
	"SparseSegmentMeanWithNumSegments":  {(*converter).segmentReduce, groupSparse, ""},
	"SparseSegmentSqrtNWithNumSegments": {(*converter).segmentReduce, groupSparse, ""},
	"SegmentSum":                        {(*converter).segmentReduce, groupSparse, "sorted segment ids"},
	"UnsortedSegmentSum":                {(*converter).segmentReduce, groupSparse, ""},
	"SparseFillEmptyRows":               {(*converter).sparseFillEmptyRows, groupSparse, ""},
	"SparseReshape":                     {(*converter).sparseReshape, groupSparse, ""},
	"SparseToDense":                     {hostAware((*converter).sparseToDense), groupSparse, "indices not validated"},
	"DepthToSpace":                      {(*converter).translateSpaceDepth, groupArray, ""},

	// Images.
	"ResizeBilinear":        {(*converter).resize, groupImage, "align_corners, half_pixel_centers"},
	"ResizeNearestNeighbor": {(*converter).resize, groupImage, "align_corners, half_pixel_centers"},

	// tf.Example parsing.
	"ParseExample":       {(*converter).parseExample, groupExample, "dense and VarLen features of a signature input"},
	"ParseExampleV2":     {(*converter).parseExample, groupExample, "dense and VarLen features of a signature input"},
	"ParseSingleExample": {(*converter).parseExample, groupExample, "dense and VarLen features of a scalar signature input"},

	// Feature columns: string hashing, lookup tables, buckets.
	"StringToHashBucketFast":        {(*converter).stringToHashBucket, groupStrings, "FarmHash, in Go"},
	"StringToHashBucketStrong":      {(*converter).stringToHashBucket, groupStrings, "SipHash-2-4, in Go"},
	"StringToHashBucket":            {(*converter).stringToHashBucket, groupStrings, "TensorFlow's Hash64, in Go"},
	"StringJoin":                    {(*converter).stringJoin, groupStrings, "in Go"},
	"StringToNumber":                {(*converter).stringToNumber, groupStrings, "float, double, int32, int64; in Go"},
	"AsString":                      {(*converter).asString, groupStrings, "integers, bools, floats; in Go"},
	"StaticRegexReplace":            {(*converter).regexReplace, groupStrings, "RE2 syntax, in Go"},
	"RegexReplace":                  {(*converter).regexReplace, groupStrings, "constant pattern and rewrite; in Go"},
	"Substr":                        {(*converter).substr, groupStrings, "BYTE, UTF8_CHAR; constant pos and len; in Go"},
	"StringLower":                   {(*converter).stringCase, groupStrings, "ASCII, in Go"},
	"StringUpper":                   {(*converter).stringCase, groupStrings, "ASCII, in Go"},
	"ReduceJoin":                    {(*converter).reduceJoin, groupStrings, "constant axes; in Go"},
	"StringSplit":                   {(*converter).stringSplit, groupStrings, "of a vector, in Go"},
	"StringSplitV2":                 {(*converter).stringSplit, groupStrings, "of a vector, in Go"},
	"HashTableV2":                   {(*converter).translateHashTable, groupStrings, ""},
	"MutableHashTableV2":            {(*converter).translateHashTable, groupStrings, "contents restored from the checkpoint"},
	"MutableHashTableOfTensorsV2":   {(*converter).translateHashTable, groupStrings, "contents restored from the checkpoint"},
	"MutableDenseHashTableV2":       {(*converter).translateHashTable, groupStrings, "contents restored from the checkpoint; constant empty and deleted keys"},
	"LookupTableImportV2":           {(*converter).translateTableInit, groupStrings, "constant keys and values, or the checkpoint's (RestoreV2), run at load"},
	"InitializeTableV2":             {(*converter).translateTableInit, groupStrings, "constant keys and values, run at load"},
	"InitializeTableFromTextFileV2": {(*converter).translateTableInit, groupStrings, "an asset file, run at load"},
	"LookupTableFindV2":             {(*converter).lookupTableFind, groupStrings, "string or int64 keys; as LabelEncoder, and Gather for rows of values"},
	"LookupTableSizeV2":             {(*converter).lookupTableSize, groupStrings, ""},
	"LookupTableExportV2":           {(*converter).lookupTableExport, groupStrings, "not of a dense table; in the checkpoint's order"},
	"Bucketize":                     {(*converter).bucketize, groupStrings, ""},

	// Control flow: While, StatelessWhile, If, StatelessIf are added by
	// control.go's init (their translators walk the graph, which reads
	// opTable: an initialization cycle if listed here).
}

// translate emits the ONNX nodes for n and records its outputs.
func (c *converter) translate(n *node) {
	if !tableReaders[n.op] {
		for _, in := range n.inputs {
			if rr, err := c.g.resolve(in); err == nil && c.vals[rr] != nil && c.vals[rr].table != "" {
				c.unsupported(n, "reads a lookup table handle; only LookupTableFindV2, LookupTableSizeV2 and LookupTableExportV2 are translated")
				return
			}
		}
	}
	if e, ok := opTable[n.op]; ok {
		e.translate(c, n)
		return
	}
	c.refuse(n)
}

// refuse records an op outside opTable, with why it is not translated.
func (c *converter) refuse(n *node) {
	why := unsupportedWhy[n.op]
	if why == "" {
		why = "not supported"
	}
	if strings.HasPrefix(n.op, "_") {
		why = "an internal TensorFlow op"
	}
	c.unsupported(n, why)
}

// same is a value with the dtype and rank of n's first input.
func (c *converter) same(n *node, name string) *value {
	return &value{name: name, dtype: c.in(n, 0).dtype, rank: c.in(n, 0).rank}
}

// unaryOp translates an elementwise op with one input to onnxOp; boolOut
// marks predicates (their result is bool).
func unaryOp(onnxOp string, boolOut bool) translator {
	return func(c *converter, n *node) {
		x := c.in(n, 0)
		v := c.same(n, c.Op1(onnxOp, x.name))
		if boolOut {
			v.dtype = tensor.Bool
		}
		c.set(n, 0, v)
	}
}

// binaryOp translates a broadcasting elementwise op with two inputs to
// onnxOp; boolOut marks comparisons and logical ops.
func binaryOp(onnxOp string, boolOut bool) translator {
	return func(c *converter, n *node) {
		a, b := c.in(n, 0), c.in(n, 1)
		v := &value{name: c.Op1(onnxOp, a.name, b.name), dtype: a.dtype, rank: maxRank(a, b)}
		if boolOut {
			v.dtype = tensor.Bool
		}
		c.set(n, 0, v)
	}
}

// reduceOp translates a reduction over the axes of input 1 to onnxOp.
func reduceOp(onnxOp string) translator {
	return func(c *converter, n *node) {
		x, axes := c.in(n, 0), c.in(n, 1)
		keep := int64(0)
		if n.b("keep_dims", false) {
			keep = 1
		}
		c.set(n, 0, &value{name: c.Op1(onnxOp, x.name, c.as1D(axes), onnxbuild.AttrInt("keepdims", keep), onnxbuild.AttrInt("noop_with_empty_axes", 1)), dtype: x.dtype, rank: -1})
	}
}

// SupportedOp describes one TensorFlow op the translation handles.
type SupportedOp struct {
	Name  string // the TensorFlow op type
	Group string // the documentation group
	Note  string // limits, such as the attribute values handled; may be empty
}

// SupportedOps lists the TensorFlow ops the translation handles, by group
// (in documentation order) then name. Some are translated only for some
// attribute values or constant inputs (see Note); others are refused.
func SupportedOps() []SupportedOp {
	names := make([]string, 0, len(opTable))
	for op := range opTable {
		names = append(names, op)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ga, gb := opTable[a].group, opTable[b].group; ga != gb {
			return int(ga) - int(gb)
		}
		return strings.Compare(a, b)
	})
	out := make([]SupportedOp, len(names))
	for i, op := range names {
		e := opTable[op]
		out[i] = SupportedOp{Name: op, Group: groupTitles[e.group], Note: e.note}
	}
	return out
}

// OpsMarkdown renders SupportedOps as the Markdown that
// processors/tensorflow/README.md carries between its generated-ops
// markers: one bullet per group, op names in backticks, lines wrapped
// near 100 columns.
func OpsMarkdown() string {
	ops := SupportedOps()
	var b strings.Builder
	fmt.Fprintf(&b, "Translated (%d ops):\n\n", len(ops))
	for i := 0; i < len(ops); {
		g := ops[i].Group
		var items []string
		for ; i < len(ops) && ops[i].Group == g; i++ {
			item := "`" + ops[i].Name + "`"
			if ops[i].Note != "" {
				item += " (" + ops[i].Note + ")"
			}
			items = append(items, item)
		}
		line := "- " + g + ":"
		for j, item := range items {
			if j < len(items)-1 {
				item += ","
			}
			if len(line)+1+len(item) > 100 {
				b.WriteString(line + "\n")
				line = " "
			}
			line += " " + item
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
