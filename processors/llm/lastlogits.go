package llm

import (
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/tensor"
)

// logitRowsInput is the input lastPositionLogits adds: int64 [rows, 1], the
// positions of the flattened [batch * sequence] hidden states whose logits
// a step needs (each row's last token).
const logitRowsInput = "eas_logit_rows"

// errNoRewrite says the graph's logits are not a projection this rewrite
// can see; the model then computes every position's logits, as exported.
var errNoRewrite = errors.New("the logits are not a MatMul of the hidden states")

// lastPositionLogits rewrites an exported decoder so that the vocabulary
// projection (lm_head) runs only on the positions a step reads: the last
// token of each row. As exported it runs on every position, so a prompt
// chunk of n tokens paid n rows of a [hidden x vocab] product, and held
// n x vocab logits, to use one (measured: 22% of GPT-2 small's prompt
// processing, 29% of a Llama-shaped model's with Llama 3's vocabulary).
// The hidden states [batch, seq, hidden] feeding the projection become
// Gather(Flatten(h, axis 2), logitRowsInput), so the logits output is
// [rows, 1, vocab]. It returns errNoRewrite when the logits are not a
// MatMul (followed by Casts or Identities at most) whose first input is
// computed by the graph (a merged decoder's
// If, a projection with a bias); model holds the whole graph.
func lastPositionLogits(model []byte, logits string) ([]byte, error) {
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(model, &m); err != nil {
		return nil, err
	}
	g := m.GetGraph()
	producer := func(name string) int {
		for i, n := range g.GetNode() {
			for _, o := range n.GetOutput() {
				if o == name {
					return i
				}
			}
		}
		return -1
	}
	// The projection, through the Casts and Identities that exporters put
	// after it (transformers casts the logits to float32).
	at := producer(logits)
	for at >= 0 && (g.Node[at].GetOpType() == "Cast" || g.Node[at].GetOpType() == "Identity") && len(g.Node[at].GetInput()) == 1 {
		at = producer(g.Node[at].Input[0])
	}
	if at < 0 {
		return nil, errNoRewrite
	}
	mm := g.Node[at]
	if mm.GetOpType() != "MatMul" || mm.GetDomain() != "" || len(mm.GetInput()) != 2 {
		return nil, errNoRewrite
	}
	hidden := mm.Input[0]
	for _, init := range g.GetInitializer() {
		if init.GetName() == hidden {
			return nil, errNoRewrite
		}
	}
	flat, rows := "eas_logit_hidden_flat", "eas_logit_hidden_rows"
	added := []*onnxpb.NodeProto{
		{OpType: "Flatten", Input: []string{hidden}, Output: []string{flat}, Name: "eas_logit_flatten",
			Attribute: []*onnxpb.AttributeProto{onnxbuild.AttrInt("axis", 2)}},
		{OpType: "Gather", Input: []string{flat, logitRowsInput}, Output: []string{rows}, Name: "eas_logit_gather",
			Attribute: []*onnxpb.AttributeProto{onnxbuild.AttrInt("axis", 0)}},
	}
	mm.Input[0] = rows
	g.Node = append(g.Node[:at], append(added, g.Node[at:]...)...)
	in := onnxbuild.ValueInfo(logitRowsInput, tensor.Int64, []int64{-1, 1})
	g.Input = append(g.Input, in)
	for _, o := range g.GetOutput() {
		if o.GetName() == logits {
			if sh := o.GetType().GetTensorType().GetShape(); sh != nil && len(sh.Dim) == 3 {
				sh.Dim[0] = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "eas_logit_rows"}}
				sh.Dim[1] = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1}}
			}
		}
	}
	return proto.Marshal(&m)
}
