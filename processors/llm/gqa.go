package llm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/tensor"
)

// The inputs slotAttention adds, read by ONNX Runtime's GroupQueryAttention:
// int32 [rows], each row's total length after the step minus one, and the
// int32 [1] longest total length of the run.
const (
	seqlensInput  = "eas_seqlens_k"
	totalLenInput = "eas_total_sequence_length"
)

// errNoSlots says the graph's attention is not one slotAttention can
// replace; the model then keeps its cache as exported (kv.go's blocks).
var errNoSlots = errors.New("the attention is not a plain softmax(q·kᵀ/√d)·v over the concatenated cache")

// slotAttention rewrites an exported decoder so that its cache is appended
// in place. As exported, every layer concatenates its past with the new
// keys and values into a fresh present tensor, and grouped-query models
// expand the key/value heads to the query heads, so each step re-copies
// every sequence's whole cache (measured: 40% of a 32-row GPT-2 decode
// step, 35% of a Llama-shaped one's), and a batch is padded to its longest
// cache. Here each layer's attention, from q, the new k and v to the
// attention output, becomes ONNX Runtime's GroupQueryAttention (contrib
// domain), whose past and present are one buffer of fixed length per row:
// it writes the new tokens at each row's own position (seqlensInput) and
// attends over that row's tokens only, so rows of different lengths run
// together without padding or copies (slots.go keeps the buffers).
//
// The match, per layer: present key and value are Concat(past, new) along
// the sequence axis; the probabilities-times-values MatMul takes the
// present value as its second input, through shape-only ops (the
// repetition of grouped heads); the scores MatMul takes the present key the
// same way, its first input being q as [batch, heads, seq, head_dim] after
// any rotary embedding. The graph's own positions (position_ids) still
// place the rotary embedding and the learnt position embeddings. The
// scaling and masking between the two MatMuls are dropped: the caller
// gates on config.json saying the attention is plain (Config.PlainAttention).
// The attention_mask input is removed when nothing else reads it.
func slotAttention(model []byte, lay *layout, heads int) ([]byte, error) {
	if lay.form != kvSplit || lay.useCacheBranch != "" || lay.positions == "" || heads <= 0 || lay.kvHeads <= 0 || heads%lay.kvHeads != 0 {
		return nil, errNoSlots
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(model, &m); err != nil {
		return nil, err
	}
	g := m.GetGraph()
	producer := map[string]*onnxpb.NodeProto{}
	consumers := map[string][]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
		for _, in := range n.GetInput() {
			consumers[in] = append(consumers[in], n)
		}
	}
	// reader finds the one MatMul that reads t as its second input through
	// ops that only move data; nil when there is none or more than one.
	reader := func(t string) *onnxpb.NodeProto {
		var found *onnxpb.NodeProto
		seen := map[string]bool{}
		todo := []string{t}
		for len(todo) > 0 {
			cur := todo[0]
			todo = todo[1:]
			if seen[cur] {
				continue
			}
			seen[cur] = true
			for _, n := range consumers[cur] {
				switch n.GetOpType() {
				case "MatMul":
					if len(n.Input) == 2 && n.Input[1] == cur && n.Input[0] != cur {
						if found != nil && found != n {
							return nil
						}
						found = n
					}
				case "Unsqueeze", "Expand", "Reshape", "Transpose", "Squeeze":
					if n.GetDomain() == "" && len(n.Input) > 0 && n.Input[0] == cur {
						todo = append(todo, n.Output...)
					}
				}
			}
		}
		return found
	}
	concatOf := func(present, past string) (string, *onnxpb.NodeProto, bool) {
		n := producer[present]
		if n == nil || n.GetOpType() != "Concat" || n.GetDomain() != "" || len(n.Input) != 2 || n.Input[0] != past {
			return "", nil, false
		}
		for _, a := range n.GetAttribute() {
			if a.GetName() == "axis" && a.GetI() != 2 && a.GetI() != -2 {
				return "", nil, false
			}
		}
		return n.Input[1], n, true
	}

	b := onnxbuild.Graph{Prefix: "eas_slot_"}
	perm := onnxbuild.AttrInts("perm", []int64{0, 2, 1, 3})
	flat := b.I64Const([]int64{0, 0, -1})
	split := b.I64Const([]int64{0, 0, int64(heads), int64(lay.headDim)})
	drop := map[*onnxpb.NodeProto]bool{}
	insertAt := map[*onnxpb.NodeProto][]*onnxpb.NodeProto{} // new nodes go before this one
	for l := 0; l < lay.layers; l++ {
		pk, pv := lay.past[2*l], lay.past[2*l+1]
		kNew, kCat, ok := concatOf(lay.present[2*l], pk)
		if !ok {
			return nil, fmt.Errorf("%w: layer %d's present key is not Concat(past, new)", errNoSlots, l)
		}
		vNew, vCat, ok := concatOf(lay.present[2*l+1], pv)
		if !ok {
			return nil, fmt.Errorf("%w: layer %d's present value is not Concat(past, new)", errNoSlots, l)
		}
		scores, mix := reader(lay.present[2*l]), reader(lay.present[2*l+1])
		if scores == nil || mix == nil || scores == mix {
			return nil, fmt.Errorf("%w: layer %d's attention MatMuls not found", errNoSlots, l)
		}
		q, out := scores.Input[0], mix.Output[0]
		before := len(b.Nodes)
		bsnh := func(t string) string {
			return b.Op1("Reshape", b.Op1("Transpose", t, perm), flat)
		}
		q3, k3, v3 := bsnh(q), bsnh(kNew), bsnh(vNew)
		attn := b.Fresh("attn")
		b.Emit("GroupQueryAttention", []string{q3, k3, v3, pk, pv, seqlensInput, totalLenInput},
			[]string{attn, lay.present[2*l], lay.present[2*l+1]},
			onnxbuild.AttrInt("num_heads", int64(heads)), onnxbuild.AttrInt("kv_num_heads", int64(lay.kvHeads)))
		b.Nodes[len(b.Nodes)-1].Domain = "com.microsoft"
		b.Emit("Transpose", []string{b.Op1("Reshape", attn, split)}, []string{out}, perm)
		insertAt[mix] = b.Nodes[before:len(b.Nodes):len(b.Nodes)]
		drop[kCat], drop[vCat], drop[mix] = true, true, true
	}

	// The new nodes replace the mixing MatMul, where every input they read
	// is already computed; then only what the outputs need is kept.
	var nodes []*onnxpb.NodeProto
	for _, n := range g.GetNode() {
		nodes = append(nodes, insertAt[n]...)
		if !drop[n] {
			nodes = append(nodes, n)
		}
	}
	needed := map[string]bool{}
	for _, o := range g.GetOutput() {
		needed[o.GetName()] = true
	}
	keep := make([]bool, len(nodes))
	for i := len(nodes) - 1; i >= 0; i-- {
		for _, o := range nodes[i].GetOutput() {
			if needed[o] {
				keep[i] = true
			}
		}
		if keep[i] {
			for _, in := range nodes[i].GetInput() {
				needed[in] = true
			}
			for _, a := range nodes[i].GetAttribute() {
				if t := a.GetType(); a.GetG() != nil || t == onnxpb.AttributeProto_GRAPH || t == 10 { // 10: GRAPHS, which onnxpb leaves out
					return nil, errNoSlots // subgraphs read outer names we do not track
				}
			}
		}
	}
	if needed[lay.mask] {
		return nil, fmt.Errorf("%w: the attention_mask is read by more than the attention", errNoSlots)
	}
	g.Node = g.Node[:0]
	for i, n := range nodes {
		if keep[i] {
			g.Node = append(g.Node, n)
		}
	}
	g.Initializer = append(g.Initializer, b.Inits...)
	var inits []*onnxpb.TensorProto
	for _, t := range g.GetInitializer() {
		if needed[t.GetName()] {
			inits = append(inits, t)
		}
	}
	g.Initializer = inits
	g.ValueInfo = nil // shapes of removed values; ONNX Runtime infers the rest
	var ins []*onnxpb.ValueInfoProto
	for _, in := range g.GetInput() {
		if in.GetName() != lay.mask {
			ins = append(ins, in)
		}
	}
	g.Input = append(ins,
		onnxbuild.ValueInfo(seqlensInput, tensor.Int32, []int64{-1}),
		onnxbuild.ValueInfo(totalLenInput, tensor.Int32, []int64{1}))
	hasMS := false
	for _, o := range m.GetOpsetImport() {
		hasMS = hasMS || o.GetDomain() == "com.microsoft"
	}
	if !hasMS {
		m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: "com.microsoft", Version: 1})
	}
	return proto.Marshal(&m)
}
