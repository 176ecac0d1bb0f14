package onnx

import (
	"sort"
	"strconv"

	"github.com/eas-server/eas-server/tensor"
)

// The batchers decide which payloads share a run (BatchKey) and how their
// inputs are merged (runMerged):
//   - concat: equal trailing shapes only; inputs are concatenated as they are;
//   - pad: equal names, dtypes and ranks; every input is right-padded with the
//     pad value to the largest dims of the batch;
//   - bucket: like pad, but only payloads whose sequence length (dim 1) falls
//     in the same bucket share a run, so short requests are not padded to the
//     longest one.
// After a padded run, every output axis that the model declares dynamic and
// that came back at the padded sequence length is cut back to each
// request's own length, so a request gets the shape it would get alone.
// Outputs that reduce over the padded axis (a mean over time) do see the
// padding: pad and bucket are for models whose outputs at real positions do
// not depend on padded ones (per-token layers, masked attention).

// padding reports whether the service pads inputs to merge them.
func (m *Model) padding() bool { return m.spec.Batcher == "pad" || m.spec.Batcher == "bucket" }

// seqLen is a payload's sequence length: the largest dim 1 of its inputs
// (0 when no input has one).
func seqLen(ins []tensor.Tensor) int64 {
	var n int64
	for _, t := range ins {
		if len(t.Shape) >= 2 {
			n = max(n, t.Shape[1])
		}
	}
	return n
}

// batchKey is BatchKey for arranged, valid inputs.
func (m *Model) batchKey(ins []tensor.Tensor) string {
	switch m.spec.Batcher {
	case "pad":
		return tensor.RankKey(ins)
	case "bucket":
		return tensor.RankKey(ins) + "|bucket=" + strconv.Itoa(bucketOf(m.spec.Buckets, seqLen(ins)))
	}
	return tensor.TrailingKey(ins)
}

// bucketOf is the index of the first bound >= n; lengths past the last bound
// share one overflow bucket.
func bucketOf(bounds []int, n int64) int {
	return sort.Search(len(bounds), func(i int) bool { return int64(bounds[i]) >= n })
}

// mergeColumn concatenates one input across payloads, padding first when
// the service's batcher pads.
func (m *Model) mergeColumn(col []tensor.Tensor) (tensor.Tensor, error) {
	if m.padding() {
		padded, _, err := tensor.PadToCommon(col, m.spec.PadValue)
		if err != nil {
			return tensor.Tensor{}, err
		}
		col = padded
	}
	return tensor.Concat(col)
}

// unpad cuts one request's output back to its own sequence length along the
// axes that came back at the padded length and that the model declares
// dynamic.
//
// An output the model does not declare (every TorchScript output) is cut
// along axis 1 only, the axis seqLen reads on the inputs: without a declared
// shape a sequence axis cannot be told from a feature axis that happens to
// come back at the padded length (a transformer's hidden size of 32 in a
// batch padded to 32 tokens was cut to each request's length too). Such
// models return per-token outputs as [batch, sequence, ...].
func (m *Model) unpad(out tensor.Tensor, own, padded int64) (tensor.Tensor, error) {
	if own >= padded {
		return out, nil
	}
	var decl []int64
	declared := false
	for _, o := range m.outputs {
		if o.Name == out.Name {
			decl, declared = o.Shape, true
		}
	}
	for axis := 1; axis < len(out.Shape); axis++ {
		dynamic := axis >= len(decl) || decl[axis] < 0
		if !declared {
			dynamic = axis == 1
		}
		if dynamic && out.Shape[axis] == padded {
			var err error
			if out, err = tensor.Slice(out, axis, own); err != nil {
				return tensor.Tensor{}, err
			}
		}
	}
	return out, nil
}
