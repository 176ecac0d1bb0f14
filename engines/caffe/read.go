package caffe

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/caffe/netpb"
)

// Net is a network ready to translate: its inputs, and the layers that run
// in Caffe's TEST phase, in order, each with its trained blobs.
type Net struct {
	Name   string
	Inputs []Input
	Layers []*Layer
}

// Input is one input blob and the shape the definition declares for it
// (its first dimension is the batch, which the translation makes dynamic).
type Input struct {
	Name  string
	Shape []int64
}

// Layer is one layer, in the current (LayerParameter) form whatever the
// file's format.
type Layer struct {
	Name    string
	Type    string
	Bottoms []string
	Tops    []string
	Param   *netpb.LayerParameter
	Blobs   []Blob
}

// Blob is one trained parameter blob.
type Blob struct {
	Shape []int64
	Data  []float32
}

// ParseDefinition reads a network definition (deploy.prototxt, protobuf
// text format). Fields this reader does not use are skipped.
func ParseDefinition(text []byte) (*netpb.NetParameter, error) {
	var np netpb.NetParameter
	if err := (prototext.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(text, &np); err != nil {
		return nil, fmt.Errorf("not a Caffe network definition (text NetParameter): %w", err)
	}
	return &np, nil
}

// ParseWeights reads trained weights (.caffemodel, binary NetParameter).
func ParseWeights(b []byte) (*netpb.NetParameter, error) {
	var np netpb.NetParameter
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &np); err != nil {
		return nil, fmt.Errorf("not Caffe weights (binary NetParameter): %w", err)
	}
	return &np, nil
}

// Load parses a definition and its weights (nil when the network has none)
// into a Net. Layers of the weights file are matched to the definition's by
// name, as Caffe does.
func Load(definition, weights []byte) (*Net, error) {
	def, err := ParseDefinition(definition)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	net, err := fromDefinition(def)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if weights == nil {
		return net, nil
	}
	w, err := ParseWeights(weights)
	if err != nil {
		return nil, fmt.Errorf("weight: %w", err)
	}
	trained, err := layerBlobs(w)
	if err != nil {
		return nil, fmt.Errorf("weight: %w", err)
	}
	for _, l := range net.Layers {
		if bs, ok := trained[l.Name]; ok {
			l.Blobs = bs
		}
	}
	return net, nil
}

func fromDefinition(np *netpb.NetParameter) (*Net, error) {
	layers, err := currentLayers(np)
	if err != nil {
		return nil, err
	}
	net := &Net{Name: np.GetName()}
	if net.Inputs, err = netInputs(np); err != nil {
		return nil, err
	}
	for _, lp := range layers {
		if !included(lp) {
			continue
		}
		l := &Layer{Name: lp.GetName(), Type: lp.GetType(), Bottoms: lp.Bottom, Tops: lp.Top, Param: lp}
		if len(lp.Blobs) > 0 {
			if l.Blobs, err = blobs(l.Name, lp.Blobs); err != nil {
				return nil, err
			}
		}
		net.Layers = append(net.Layers, l)
	}
	return net, nil
}

// currentLayers returns the layers in LayerParameter form, upgrading the V1
// format (NetParameter.layers).
func currentLayers(np *netpb.NetParameter) ([]*netpb.LayerParameter, error) {
	switch {
	case len(np.Layer) > 0 && len(np.Layers) > 0:
		return nil, errors.New("the file mixes the current format (layer) and the V1 format (layers); upgrade it with Caffe's upgrade_net_proto_text")
	case len(np.Layers) > 0:
		out := make([]*netpb.LayerParameter, len(np.Layers))
		for i, v1 := range np.Layers {
			lp, err := upgradeV1(v1)
			if err != nil {
				return nil, err
			}
			out[i] = lp
		}
		return out, nil
	}
	return np.Layer, nil
}

// v1Types names the V1 layer types as the current format does.
var v1Types = map[netpb.V1LayerParameter_LayerType]string{
	netpb.V1LayerParameter_ABSVAL: "AbsVal", netpb.V1LayerParameter_ACCURACY: "Accuracy",
	netpb.V1LayerParameter_ARGMAX: "ArgMax", netpb.V1LayerParameter_BNLL: "BNLL",
	netpb.V1LayerParameter_CONCAT: "Concat", netpb.V1LayerParameter_CONTRASTIVE_LOSS: "ContrastiveLoss",
	netpb.V1LayerParameter_CONVOLUTION: "Convolution", netpb.V1LayerParameter_DATA: "Data",
	netpb.V1LayerParameter_DECONVOLUTION: "Deconvolution", netpb.V1LayerParameter_DROPOUT: "Dropout",
	netpb.V1LayerParameter_DUMMY_DATA: "DummyData", netpb.V1LayerParameter_EUCLIDEAN_LOSS: "EuclideanLoss",
	netpb.V1LayerParameter_ELTWISE: "Eltwise", netpb.V1LayerParameter_EXP: "Exp",
	netpb.V1LayerParameter_FLATTEN: "Flatten", netpb.V1LayerParameter_HDF5_DATA: "HDF5Data",
	netpb.V1LayerParameter_HDF5_OUTPUT: "HDF5Output", netpb.V1LayerParameter_HINGE_LOSS: "HingeLoss",
	netpb.V1LayerParameter_IM2COL: "Im2col", netpb.V1LayerParameter_IMAGE_DATA: "ImageData",
	netpb.V1LayerParameter_INFOGAIN_LOSS: "InfogainLoss", netpb.V1LayerParameter_INNER_PRODUCT: "InnerProduct",
	netpb.V1LayerParameter_LRN: "LRN", netpb.V1LayerParameter_MEMORY_DATA: "MemoryData",
	netpb.V1LayerParameter_MULTINOMIAL_LOGISTIC_LOSS: "MultinomialLogisticLoss", netpb.V1LayerParameter_MVN: "MVN",
	netpb.V1LayerParameter_POOLING: "Pooling", netpb.V1LayerParameter_POWER: "Power",
	netpb.V1LayerParameter_RELU: "ReLU", netpb.V1LayerParameter_SIGMOID: "Sigmoid",
	netpb.V1LayerParameter_SIGMOID_CROSS_ENTROPY_LOSS: "SigmoidCrossEntropyLoss", netpb.V1LayerParameter_SILENCE: "Silence",
	netpb.V1LayerParameter_SOFTMAX: "Softmax", netpb.V1LayerParameter_SOFTMAX_LOSS: "SoftmaxWithLoss",
	netpb.V1LayerParameter_SPLIT: "Split", netpb.V1LayerParameter_SLICE: "Slice",
	netpb.V1LayerParameter_TANH: "TanH", netpb.V1LayerParameter_WINDOW_DATA: "WindowData",
	netpb.V1LayerParameter_THRESHOLD: "Threshold",
}

// upgradeV1 turns a V1 layer into a current one; the parameter messages are
// the same types in both formats.
func upgradeV1(v1 *netpb.V1LayerParameter) (*netpb.LayerParameter, error) {
	if v1.Layer != nil {
		return nil, fmt.Errorf("layer %q is in the V0 format (layers { layer { ... } }), which is not read; upgrade the file with Caffe's upgrade_net_proto_text and upgrade_net_proto_binary", v1.GetName())
	}
	typ, ok := v1Types[v1.GetType()]
	if !ok {
		typ = v1.GetType().String()
	}
	return &netpb.LayerParameter{
		Name: v1.Name, Type: &typ, Bottom: v1.Bottom, Top: v1.Top,
		Include: v1.Include, Exclude: v1.Exclude, Blobs: v1.Blobs, LossWeight: v1.LossWeight,
		ArgmaxParam:       v1.ArgmaxParam,
		ConcatParam:       v1.ConcatParam,
		ConvolutionParam:  v1.ConvolutionParam,
		DropoutParam:      v1.DropoutParam,
		EltwiseParam:      v1.EltwiseParam,
		ExpParam:          v1.ExpParam,
		InnerProductParam: v1.InnerProductParam,
		LrnParam:          v1.LrnParam,
		PoolingParam:      v1.PoolingParam,
		PowerParam:        v1.PowerParam,
		ReluParam:         v1.ReluParam,
		SoftmaxParam:      v1.SoftmaxParam,
		SliceParam:        v1.SliceParam,
	}, nil
}

// netInputs reads the net-level inputs (input with input_shape or
// input_dim), the form that came before the Input layer.
func netInputs(np *netpb.NetParameter) ([]Input, error) {
	if len(np.Input) == 0 {
		if len(np.InputShape) > 0 || len(np.InputDim) > 0 {
			return nil, errors.New("input_shape or input_dim is given without input names")
		}
		return nil, nil
	}
	ins := make([]Input, len(np.Input))
	switch {
	case len(np.InputShape) == len(np.Input):
		for i, name := range np.Input {
			ins[i] = Input{Name: name, Shape: slices.Clone(np.InputShape[i].GetDim())}
		}
	case len(np.InputShape) == 0 && len(np.InputDim) == 4*len(np.Input):
		for i, name := range np.Input {
			d := np.InputDim[4*i : 4*i+4]
			ins[i] = Input{Name: name, Shape: []int64{int64(d[0]), int64(d[1]), int64(d[2]), int64(d[3])}}
		}
	default:
		return nil, fmt.Errorf("%d inputs need %d input_shape entries or %d input_dim values; got %d and %d",
			len(np.Input), len(np.Input), 4*len(np.Input), len(np.InputShape), len(np.InputDim))
	}
	return ins, nil
}

// included says whether a layer runs in the TEST phase (level 0, no
// stages), by Caffe's include/exclude rules: any include rule met, or no
// include rules and no exclude rule met.
func included(lp *netpb.LayerParameter) bool {
	if len(lp.Include) > 0 {
		return slices.ContainsFunc(lp.Include, testPhaseMeets)
	}
	return !slices.ContainsFunc(lp.Exclude, testPhaseMeets)
}

func testPhaseMeets(r *netpb.NetStateRule) bool {
	if r.Phase != nil && r.GetPhase() != netpb.Phase_TEST {
		return false
	}
	if r.MinLevel != nil && 0 < r.GetMinLevel() {
		return false
	}
	if r.MaxLevel != nil && 0 > r.GetMaxLevel() {
		return false
	}
	return len(r.Stage) == 0 // the net has no stages, so no stage rule is met
}

// layerBlobs maps layer names to their trained blobs, from either format.
func layerBlobs(np *netpb.NetParameter) (map[string][]Blob, error) {
	out := map[string][]Blob{}
	add := func(name string, bps []*netpb.BlobProto) error {
		if len(bps) == 0 {
			return nil
		}
		bs, err := blobs(name, bps)
		if err != nil {
			return err
		}
		out[name] = bs
		return nil
	}
	for _, l := range np.Layer {
		if err := add(l.GetName(), l.Blobs); err != nil {
			return nil, err
		}
	}
	for _, l := range np.Layers {
		if err := add(l.GetName(), l.Blobs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// blobs converts stored blobs to float32 with their shapes, checking that
// each shape holds exactly the values stored.
func blobs(layer string, bps []*netpb.BlobProto) ([]Blob, error) {
	out := make([]Blob, len(bps))
	for i, bp := range bps {
		var shape []int64
		if bp.Shape != nil {
			shape = slices.Clone(bp.Shape.Dim)
		} else {
			shape = []int64{int64(bp.GetNum()), int64(bp.GetChannels()), int64(bp.GetHeight()), int64(bp.GetWidth())}
		}
		var data []float32
		switch {
		case len(bp.Data) > 0 && len(bp.DoubleData) > 0:
			return nil, fmt.Errorf("layer %q blob %d holds both data and double_data", layer, i)
		case len(bp.DoubleData) > 0:
			data = make([]float32, len(bp.DoubleData))
			for j, v := range bp.DoubleData {
				data[j] = float32(v)
			}
		default:
			data = bp.Data
		}
		n, ok := count(shape)
		if !ok || n != int64(len(data)) {
			if bp.Shape == nil && !ok {
				// Legacy blobs with no 4-D fields set: take the values as a vector.
				shape, n, ok = []int64{int64(len(data))}, int64(len(data)), true
			}
			if !ok || n != int64(len(data)) {
				return nil, fmt.Errorf("layer %q blob %d: shape %v does not hold its %d values", layer, i, shape, len(data))
			}
		}
		out[i] = Blob{Shape: shape, Data: data}
	}
	return out, nil
}

// count multiplies dims; ok is false for a negative or zero dim, or when the
// product overflows the element limit.
func count(dims []int64) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d <= 0 || n > maxElements/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// maxElements bounds every blob (per sample: 1 GiB of float32), so a
// definition declaring absurd shapes fails at load instead of at the first
// request.
const maxElements = 1 << 28

// maxConstant bounds a constant the translation computes from shapes
// alone (not from stored weights), so a small definition cannot make it
// allocate much.
const maxConstant = 1 << 22
