package caffe

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/eas-server/eas-server/engines/caffe/netpb"
	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

// layerFuncs translates each supported layer type. Every function gets the
// values of the layer's bottoms and returns one value per top; shapes are
// computed here as Caffe computes them, so each ONNX node gets static
// attributes and only the batch stays dynamic.
var layerFuncs map[string]layerFunc

func init() {
	layerFuncs = map[string]layerFunc{
		"Convolution":   convolution,
		"Deconvolution": convolution,
		"Pooling":       pooling,
		"InnerProduct":  innerProduct,
		"ReLU":          relu,
		"PReLU":         prelu,
		"Sigmoid":       unary("Sigmoid"),
		"TanH":          unary("Tanh"),
		"AbsVal":        unary("Abs"),
		"ELU":           elu,
		"Power":         power,
		"Exp":           exp,
		"Log":           logLayer,
		"BatchNorm":     batchNorm,
		"Scale":         scaleOrBias,
		"Bias":          scaleOrBias,
		"Eltwise":       eltwise,
		"Concat":        concat,
		"Slice":         slice,
		"Split":         split,
		"Flatten":       flatten,
		"Reshape":       reshape,
		"Softmax":       softmax,
		"LRN":           lrn,
		"Dropout":       dropout,
		"Crop":          crop,
		"Permute":       permute,
		"ArgMax":        argMax,
		"Silence":       func(*converter, *Layer, []*val) ([]*val, error) { return nil, nil },
	}
}

var (
	attrInt   = onnxbuild.AttrInt
	attrInts  = onnxbuild.AttrInts
	attrFloat = onnxbuild.AttrFloat
)

// bottoms checks the number of bottoms.
func bottoms(in []*val, min, max int) error {
	if len(in) < min || len(in) > max {
		if min == max {
			return fmt.Errorf("takes %d bottom(s), has %d", min, len(in))
		}
		return fmt.Errorf("takes %d to %d bottoms, has %d", min, max, len(in))
	}
	return nil
}

// canonAxis turns a Caffe axis (negative counts from the end) into an index.
func canonAxis(axis int32, rank int) (int, error) {
	a := int(axis)
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= rank {
		return 0, fmt.Errorf("axis %d is out of range for a blob of %d axes", axis, rank)
	}
	return a, nil
}

// noBatchAt refuses an operation across the batch axis: it would mix the
// requests a batch merges.
func noBatchAt(v *val, axes ...int) error {
	if slices.Contains(axes, v.bax) {
		return fmt.Errorf("works along axis %d, which carries the batch; the server cannot batch requests through it", v.bax)
	}
	return nil
}

// blob returns trained blob i of l, which must hold the values of shape
// (Caffe's shape for it; only the count is checked, as old files store
// other shapes). In the weight-shape listing mode a missing blob is zeros.
func (c *converter) blob(l *Layer, i int, shape []int64, what string) ([]float32, error) {
	want, ok := count(shape)
	if len(shape) == 0 {
		want, ok = 1, true
	}
	if !ok {
		return nil, fmt.Errorf("blob %d (%s) of shape %v is too large", i, what, shape)
	}
	if c.needs != nil {
		ls := c.needs[l.Name]
		for len(ls) <= i {
			ls = append(ls, nil)
		}
		ls[i] = slices.Clone(shape)
		c.needs[l.Name] = ls
		if i >= len(l.Blobs) {
			return make([]float32, want), nil
		}
	}
	if i >= len(l.Blobs) {
		return nil, fmt.Errorf("needs trained blob %d (%s) but has %d; the weights file must hold this layer, by name", i, what, len(l.Blobs))
	}
	b := l.Blobs[i]
	if int64(len(b.Data)) != want {
		return nil, fmt.Errorf("blob %d (%s) holds %d values (shape %v), the layer needs %d (shape %v)", i, what, len(b.Data), b.Shape, want, shape)
	}
	return b.Data, nil
}

// power is x^e; 0.75 (LRN's usual beta) and 0.5 become square roots,
// which cost far less than Pow's exp and log.
func (c *converter) power(x string, e float32) string {
	switch e {
	case 0.5:
		return c.Op1("Sqrt", x)
	case 0.75:
		s := c.Op1("Sqrt", x)
		return c.Op1("Mul", s, c.Op1("Sqrt", s))
	}
	return c.Op1("Pow", x, c.scalar(e))
}

func (c *converter) scalar(f float32) string { return c.F32Const([]float32{f}, []int64{}) }

func (c *converter) out(name string, shape []int64, bax int) *val {
	return &val{name: name, shape: shape, bax: bax}
}

func unary(op string) layerFunc {
	return func(c *converter, l *Layer, in []*val) ([]*val, error) {
		if err := bottoms(in, 1, 1); err != nil {
			return nil, err
		}
		return []*val{c.out(c.Op1(op, in[0].name), in[0].shape, in[0].bax)}, nil
	}
}

// spatialParams reads a kernel, pad, stride or dilation setting for n
// spatial axes: the _h/_w pair when set (2-D only), else the repeated field
// with one value for every axis or one per axis, else def.
func spatialParams(what string, n int, rep []uint32, h, w *uint32, def int64) ([]int64, error) {
	if h != nil || w != nil {
		if n != 2 {
			return nil, fmt.Errorf("%s_h/%s_w are for 2-D blobs; this one has %d spatial axes", what, what, n)
		}
		if len(rep) > 0 {
			return nil, fmt.Errorf("give either %s or %s_h/%s_w, not both", what, what, what)
		}
		if h == nil || w == nil {
			return nil, fmt.Errorf("%s_h and %s_w must be given together", what, what)
		}
		return checkSpatial(what, []int64{int64(*h), int64(*w)})
	}
	out := make([]int64, n)
	switch len(rep) {
	case 0:
		for i := range out {
			out[i] = def
		}
	case 1:
		for i := range out {
			out[i] = int64(rep[0])
		}
	default:
		if len(rep) != n {
			return nil, fmt.Errorf("%s has %d values; give 1 or %d", what, len(rep), n)
		}
		for i, v := range rep {
			out[i] = int64(v)
		}
	}
	return checkSpatial(what, out)
}

// maxSpatial bounds kernel, pad, stride and dilation values, so shape
// arithmetic cannot overflow.
const maxSpatial = 1 << 20

func checkSpatial(what string, v []int64) ([]int64, error) {
	for _, x := range v {
		if x > maxSpatial {
			return nil, fmt.Errorf("%s %v is larger than %d", what, v, maxSpatial)
		}
	}
	return v, nil
}

func product(v []int64) int64 {
	n := int64(1)
	for _, d := range v {
		n *= d
	}
	return n
}

// convolution handles Convolution (Conv) and Deconvolution (ConvTranspose).
func convolution(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetConvolutionParam()
	if p == nil {
		p = &netpb.ConvolutionParameter{} // absent: every field at its default
	}
	if p.GetAxis() != 1 {
		return nil, fmt.Errorf("convolution_param.axis %d is not supported; only 1 (channels) is", p.GetAxis())
	}
	if x.rank() < 3 || x.bax != 0 {
		return nil, fmt.Errorf("needs an N x C x spatial... blob with the batch first, got shape %v", x.onnxShape())
	}
	n := x.rank() - 2
	if p.KernelSize == nil && p.KernelH == nil && p.KernelW == nil {
		return nil, errors.New("convolution_param has no kernel_size")
	}
	kernel, err := spatialParams("kernel", n, p.KernelSize, p.KernelH, p.KernelW, 0)
	if err != nil {
		return nil, err
	}
	pad, err := spatialParams("pad", n, p.Pad, p.PadH, p.PadW, 0)
	if err != nil {
		return nil, err
	}
	stride, err := spatialParams("stride", n, p.Stride, p.StrideH, p.StrideW, 1)
	if err != nil {
		return nil, err
	}
	dil, err := spatialParams("dilation", n, p.Dilation, nil, nil, 1)
	if err != nil {
		return nil, err
	}
	for i := range n {
		if kernel[i] < 1 || stride[i] < 1 || dil[i] < 1 {
			return nil, fmt.Errorf("kernel %v, stride %v and dilation %v must be positive", kernel, stride, dil)
		}
	}
	cin, cout, group := x.shape[1], int64(p.GetNumOutput()), int64(p.GetGroup())
	if cout < 1 || group < 1 {
		return nil, fmt.Errorf("num_output %d and group %d must be positive", cout, group)
	}
	if cin%group != 0 || cout%group != 0 {
		return nil, fmt.Errorf("group %d must divide both the input channels %d and num_output %d", group, cin, cout)
	}
	deconv := l.Type == "Deconvolution"
	var wshape []int64
	if deconv {
		wshape = append([]int64{cin, cout / group}, kernel...)
	} else {
		wshape = append([]int64{cout, cin / group}, kernel...)
	}
	w, err := c.blob(l, 0, wshape, "weights")
	if err != nil {
		return nil, err
	}
	args := []any{x.name, c.F32Const(w, wshape)}
	if p.GetBiasTerm() {
		b, err := c.blob(l, 1, []int64{cout}, "bias")
		if err != nil {
			return nil, err
		}
		args = append(args, c.F32Const(b, []int64{cout}))
	}
	outShape := []int64{1, cout}
	for i := range n {
		h, ek := x.shape[2+i], dil[i]*(kernel[i]-1)+1
		var o int64
		if deconv {
			o = stride[i]*(h-1) + ek - 2*pad[i]
		} else {
			o = (h+2*pad[i]-ek)/stride[i] + 1
			if h+2*pad[i] < ek {
				o = 0
			}
		}
		if o < 1 {
			return nil, fmt.Errorf("spatial axis %d: input %d with kernel %d, pad %d, stride %d and dilation %d leaves no output", i, h, kernel[i], pad[i], stride[i], dil[i])
		}
		outShape = append(outShape, o)
	}
	if _, ok := count(outShape); !ok {
		return nil, fmt.Errorf("output shape %v is too large", outShape)
	}
	args = append(args, attrInts("kernel_shape", kernel), attrInts("strides", stride), attrInts("dilations", dil),
		attrInts("pads", append(slices.Clone(pad), pad...)), attrInt("group", group))
	op := "Conv"
	if deconv {
		op = "ConvTranspose"
	}
	return []*val{c.out(c.Op1(op, args...), outShape, 0)}, nil
}

// pooling follows Caffe's geometry: output sizes round up (unless
// round_mode is FLOOR) and a last window that would start in the padding is
// dropped. Pads are made explicit so ONNX gets exactly that size, and an
// average divides by the window clipped to the padded input, as Caffe does.
func pooling(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetPoolingParam()
	if p == nil {
		p = &netpb.PoolingParameter{} // absent: every field at its default
	}
	if x.rank() != 4 || x.bax != 0 {
		return nil, fmt.Errorf("needs an N x C x H x W blob with the batch first, got shape %v", x.onnxShape())
	}
	method := p.GetPool()
	if method == netpb.PoolingParameter_STOCHASTIC {
		return nil, errors.New("STOCHASTIC pooling is not supported; use MAX or AVE")
	}
	H, W := x.shape[2], x.shape[3]
	if p.GetGlobalPooling() {
		op := "GlobalMaxPool"
		if method == netpb.PoolingParameter_AVE {
			op = "GlobalAveragePool"
		}
		return []*val{c.out(c.Op1(op, x.name), []int64{1, x.shape[1], 1, 1}, 0)}, nil
	}
	if p.KernelSize == nil && p.KernelH == nil && p.KernelW == nil {
		return nil, errors.New("pooling_param has no kernel_size (or global_pooling)")
	}
	kernel, err := spatialParams("kernel", 2, p.KernelSize, p.KernelH, p.KernelW, 0)
	if err != nil {
		return nil, err
	}
	pad, err := spatialParams("pad", 2, p.Pad, p.PadH, p.PadW, 0)
	if err != nil {
		return nil, err
	}
	stride, err := spatialParams("stride", 2, p.Stride, p.StrideH, p.StrideW, 1)
	if err != nil {
		return nil, err
	}
	in2 := []int64{H, W}
	out := make([]int64, 2)
	padEnd := make([]int64, 2)
	for i := range 2 {
		k, s, pd, h := kernel[i], stride[i], pad[i], in2[i]
		if k < 1 || s < 1 {
			return nil, fmt.Errorf("kernel %v and stride %v must be positive", kernel, stride)
		}
		if pd >= k {
			return nil, fmt.Errorf("pad %d must be smaller than the kernel %d", pd, k)
		}
		span := h + 2*pd - k
		if span < 0 {
			return nil, fmt.Errorf("kernel %d is larger than the padded input %d", k, h+2*pd)
		}
		o := span/s + 1
		if p.GetRoundMode() == netpb.PoolingParameter_CEIL && span%s != 0 {
			o++
		}
		if pd > 0 && (o-1)*s >= h+pd {
			o--
		}
		out[i] = o
		padEnd[i] = max(0, (o-1)*s+k-h-pd)
		if (h+pd+padEnd[i]-k)/s+1 != o {
			return nil, fmt.Errorf("pooling geometry (input %d, kernel %d, stride %d, pad %d) is not supported", h, k, s, pd)
		}
	}
	pads := []int64{pad[0], pad[1], padEnd[0], padEnd[1]}
	shape := []int64{1, x.shape[1], out[0], out[1]}
	if method == netpb.PoolingParameter_MAX {
		y := c.Op1("MaxPool", x.name, attrInts("kernel_shape", kernel), attrInts("strides", stride), attrInts("pads", pads))
		return []*val{c.out(y, shape, 0)}, nil
	}
	// AVE: ONNX averages over the whole kernel (zeros in the padding);
	// Caffe divides by the window clipped to [-pad, size+pad).
	y := c.Op1("AveragePool", x.name, attrInts("kernel_shape", kernel), attrInts("strides", stride), attrInts("pads", pads), attrInt("count_include_pad", 1))
	area := float64(kernel[0] * kernel[1])
	if out[0]*out[1] > maxConstant {
		return nil, fmt.Errorf("AVE pooling output of %d x %d is larger than the %d positions supported", out[0], out[1], maxConstant)
	}
	fix := make([]float32, out[0]*out[1])
	uniform := true
	for oh := range out[0] {
		hs := oh*stride[0] - pad[0]
		he := min(hs+kernel[0], H+pad[0])
		for ow := range out[1] {
			ws := ow*stride[1] - pad[1]
			we := min(ws+kernel[1], W+pad[1])
			f := area / float64((he-hs)*(we-ws))
			fix[oh*out[1]+ow] = float32(f)
			if f != 1 {
				uniform = false
			}
		}
	}
	if !uniform {
		y = c.Op1("Mul", y, c.F32Const(fix, []int64{1, 1, out[0], out[1]}))
	}
	return []*val{c.out(y, shape, 0)}, nil
}

func innerProduct(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetInnerProductParam()
	if p == nil {
		p = &netpb.InnerProductParameter{} // absent: every field at its default
	}
	axis, err := canonAxis(p.GetAxis(), x.rank())
	if err != nil {
		return nil, err
	}
	if x.bax >= axis {
		return nil, fmt.Errorf("axis %d: the batch (axis %d) would be folded into the inner product", axis, x.bax)
	}
	k := product(x.shape[axis:])
	n := int64(p.GetNumOutput())
	if n < 1 {
		return nil, errors.New("num_output must be positive")
	}
	wshape := []int64{n, k}
	if p.GetTranspose() {
		wshape = []int64{k, n}
	}
	w, err := c.blob(l, 0, wshape, "weights")
	if err != nil {
		return nil, err
	}
	var bias string
	if p.GetBiasTerm() {
		b, err := c.blob(l, 1, []int64{n}, "bias")
		if err != nil {
			return nil, err
		}
		bias = c.F32Const(b, []int64{n})
	}
	outShape := append(slices.Clone(x.shape[:axis]), n)
	if axis == 1 && x.bax == 0 {
		// The common case: Gemm on [N, K]; Caffe stores [num_output, K]
		// unless transpose is set.
		flat := x.name
		if x.rank() != 2 {
			flat = c.Op1("Flatten", x.name, attrInt("axis", 1))
		}
		wname, transB := c.F32Const(w, []int64{n, k}), int64(1)
		if p.GetTranspose() {
			wname, transB = c.F32Const(w, []int64{k, n}), 0
		}
		args := []any{flat, wname, attrInt("transB", transB)}
		if bias != "" {
			args = append(args, bias)
		}
		return []*val{c.out(c.Op1("Gemm", args...), outShape, 0)}, nil
	}
	// Otherwise MatMul over [..., K] with the weights as [K, num_output].
	kn := w
	if !p.GetTranspose() {
		kn = make([]float32, len(w))
		for i := range n {
			for j := range k {
				kn[j*n+i] = w[i*k+j]
			}
		}
	}
	lead := &val{shape: append(slices.Clone(x.shape[:axis]), k), bax: x.bax}
	flat := c.Op1("Reshape", x.name, c.I64Const(lead.onnxShape()))
	y := c.Op1("MatMul", flat, c.F32Const(kn, []int64{k, n}))
	if bias != "" {
		y = c.Op1("Add", y, bias)
	}
	return []*val{c.out(y, outShape, x.bax)}, nil
}

func relu(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	slope := l.Param.GetReluParam().GetNegativeSlope()
	if slope == 0 {
		return []*val{c.out(c.Op1("Relu", x.name), x.shape, x.bax)}, nil
	}
	return []*val{c.out(c.Op1("LeakyRelu", x.name, attrFloat("alpha", slope)), x.shape, x.bax)}, nil
}

func prelu(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	if x.rank() < 2 {
		return nil, fmt.Errorf("needs a blob with channels (axis 1), got shape %v", x.onnxShape())
	}
	if l.Param.GetPreluParam().GetChannelShared() {
		s, err := c.blob(l, 0, []int64{}, "slope")
		if err != nil {
			return nil, err
		}
		return []*val{c.out(c.Op1("PRelu", x.name, c.F32Const(s, []int64{1})), x.shape, x.bax)}, nil
	}
	if err := noBatchAt(x, 1); err != nil {
		return nil, err
	}
	ch := x.shape[1]
	s, err := c.blob(l, 0, []int64{ch}, "slopes")
	if err != nil {
		return nil, err
	}
	shape := []int64{ch}
	for range x.rank() - 2 {
		shape = append(shape, 1)
	}
	return []*val{c.out(c.Op1("PRelu", x.name, c.F32Const(s, shape)), x.shape, x.bax)}, nil
}

func elu(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	return []*val{c.out(c.Op1("Elu", x.name, attrFloat("alpha", l.Param.GetEluParam().GetAlpha())), x.shape, x.bax)}, nil
}

// affine emits shift + scale * x, skipping identities.
func (c *converter) affine(x string, scale, shift float32) string {
	if scale != 1 {
		x = c.Op1("Mul", x, c.scalar(scale))
	}
	if shift != 0 {
		x = c.Op1("Add", x, c.scalar(shift))
	}
	return x
}

// power is (shift + scale * x) ^ power.
func power(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetPowerParam()
	if p == nil {
		p = &netpb.PowerParameter{} // absent: every field at its default
	}
	y := c.affine(x.name, p.GetScale(), p.GetShift())
	switch pw := p.GetPower(); pw {
	case 1:
		if y == x.name {
			y = c.Op1("Identity", y)
		}
	case 2:
		y = c.Op1("Mul", y, y)
	default:
		y = c.power(y, pw)
	}
	return []*val{c.out(y, x.shape, x.bax)}, nil
}

// logBase is ln(base), with Caffe's -1 meaning e.
func logBase(base float32) (float64, error) {
	if base == -1 {
		return 1, nil
	}
	if base <= 0 {
		return 0, fmt.Errorf("base %g must be positive (or -1 for e)", base)
	}
	return math.Log(float64(base)), nil
}

// exp is base ^ (shift + scale * x).
func exp(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetExpParam()
	if p == nil {
		p = &netpb.ExpParameter{} // absent: every field at its default
	}
	lb, err := logBase(p.GetBase())
	if err != nil {
		return nil, err
	}
	y := c.Op1("Exp", c.affine(x.name, float32(lb*float64(p.GetScale())), float32(lb*float64(p.GetShift()))))
	return []*val{c.out(y, x.shape, x.bax)}, nil
}

// logLayer is log_base(shift + scale * x).
func logLayer(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetLogParam()
	if p == nil {
		p = &netpb.LogParameter{} // absent: every field at its default
	}
	lb, err := logBase(p.GetBase())
	if err != nil {
		return nil, err
	}
	y := c.Op1("Log", c.affine(x.name, p.GetScale(), p.GetShift()))
	if lb != 1 {
		y = c.Op1("Mul", y, c.scalar(float32(1/lb)))
	}
	return []*val{c.out(y, x.shape, x.bax)}, nil
}

// channelShape is [C, 1, ...] broadcasting along axis 1 of a rank-r blob.
func channelShape(ch int64, rank int) []int64 {
	s := []int64{ch}
	for range rank - 2 {
		s = append(s, 1)
	}
	return s
}

// batchNorm normalizes with the stored statistics, which Caffe keeps
// multiplied by a moving-average factor (the third blob).
func batchNorm(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetBatchNormParam()
	if p == nil {
		p = &netpb.BatchNormParameter{} // absent: every field at its default
	}
	if p.UseGlobalStats != nil && !p.GetUseGlobalStats() {
		return nil, errors.New("use_global_stats: false normalizes with the statistics of each batch, which depend on how the server groups requests; remove it (the TEST phase uses the stored statistics)")
	}
	if x.rank() < 2 {
		return nil, fmt.Errorf("needs a blob with channels (axis 1), got shape %v", x.onnxShape())
	}
	if err := noBatchAt(x, 1); err != nil {
		return nil, err
	}
	ch := x.shape[1]
	mean, err := c.blob(l, 0, []int64{ch}, "mean")
	if err != nil {
		return nil, err
	}
	variance, err := c.blob(l, 1, []int64{ch}, "variance")
	if err != nil {
		return nil, err
	}
	sf, err := c.blob(l, 2, []int64{1}, "moving-average factor")
	if err != nil {
		return nil, err
	}
	f := 0.0
	if sf[0] != 0 {
		f = 1 / float64(sf[0])
	}
	eps := float64(p.GetEps())
	a, b := make([]float32, ch), make([]float32, ch)
	for i := range ch {
		inv := 1 / math.Sqrt(float64(variance[i])*f+eps)
		a[i] = float32(inv)
		b[i] = float32(-float64(mean[i]) * f * inv)
	}
	shape := channelShape(ch, x.rank())
	y := c.Op1("Add", c.Op1("Mul", x.name, c.F32Const(a, shape)), c.F32Const(b, shape))
	return []*val{c.out(y, x.shape, x.bax)}, nil
}

// scaleOrBias multiplies (Scale) or adds (Bias) a blob over axes
// [axis, axis+num_axes) of the first bottom. The factor is the second
// bottom when there is one, else a trained blob; Scale's bias_term adds a
// trained bias after.
func scaleOrBias(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 2); err != nil {
		return nil, err
	}
	x := in[0]
	isScale := l.Type == "Scale"
	var axis32, numAxes int32
	var biasTerm bool
	if isScale {
		p := l.Param.GetScaleParam()
		if p == nil {
			p = &netpb.ScaleParameter{} // absent: every field at its default
		}
		axis32, numAxes, biasTerm = p.GetAxis(), p.GetNumAxes(), p.GetBiasTerm()
	} else {
		p := l.Param.GetBiasParam()
		if p == nil {
			p = &netpb.BiasParameter{} // absent: every field at its default
		}
		axis32, numAxes = p.GetAxis(), p.GetNumAxes()
	}
	op := "Add"
	if isScale {
		op = "Mul"
	}
	var factorShape []int64
	var axis int
	var err error
	if len(in) == 2 {
		f := in[1]
		// A scalar second bottom applies along any axis.
		if f.rank() == 0 {
			return []*val{c.out(c.Op1(op, x.name, f.name), x.shape, x.bax)}, nil
		}
		if axis, err = canonAxis(axis32, x.rank()); err != nil {
			return nil, err
		}
		if axis+f.rank() > x.rank() || !slices.Equal(f.shape, x.shape[axis:axis+f.rank()]) || (f.bax >= 0 && f.bax+axis != x.bax) {
			return nil, fmt.Errorf("bottom 1 of shape %v does not match bottom 0 (%v) from axis %d", f.onnxShape(), x.onnxShape(), axis)
		}
		target := &val{shape: slices.Clone(f.shape), bax: f.bax}
		for range x.rank() - axis - f.rank() {
			target.shape = append(target.shape, 1)
		}
		fv := c.Op1("Reshape", f.name, c.I64Const(target.onnxShape()))
		y := c.Op1(op, x.name, fv)
		if biasTerm {
			bshape := target.shape
			if f.bax >= 0 {
				return nil, errors.New("bias_term with a per-sample scale bottom is not supported")
			}
			b, err := c.blob(l, 0, f.shape, "bias")
			if err != nil {
				return nil, err
			}
			y = c.Op1("Add", y, c.F32Const(b, bshape))
		}
		return []*val{c.out(y, x.shape, x.bax)}, nil
	}
	if axis, err = canonAxis(axis32, x.rank()); err != nil {
		if !(axis32 == int32(x.rank()) && numAxes == 0) {
			return nil, err
		}
		axis = x.rank()
	}
	end := x.rank()
	if numAxes >= 0 {
		end = axis + int(numAxes)
		if end > x.rank() {
			return nil, fmt.Errorf("axis %d with num_axes %d goes past the blob's %d axes", axis, numAxes, x.rank())
		}
	} else if numAxes != -1 {
		return nil, fmt.Errorf("num_axes %d must be -1 or more", numAxes)
	}
	if x.bax >= axis && x.bax < end {
		return nil, fmt.Errorf("the trained blob would cover the batch axis %d", x.bax)
	}
	factorShape = slices.Clone(x.shape[axis:end])
	for range x.rank() - end {
		factorShape = append(factorShape, 1)
	}
	n := product(x.shape[axis:end])
	what := "scale"
	if !isScale {
		what = "bias"
	}
	fdata, err := c.blob(l, 0, x.shape[axis:end], what)
	if err != nil {
		return nil, err
	}
	y := c.Op1(op, x.name, c.F32Const(fdata, factorShape))
	if biasTerm {
		b, err := c.blob(l, 1, []int64{n}, "bias")
		if err != nil {
			return nil, err
		}
		y = c.Op1("Add", y, c.F32Const(b, factorShape))
	}
	return []*val{c.out(y, x.shape, x.bax)}, nil
}

func sameShapes(in []*val) error {
	for _, v := range in[1:] {
		if !slices.Equal(v.shape, in[0].shape) || v.bax != in[0].bax {
			return fmt.Errorf("bottoms must have one shape; got %v and %v", in[0].onnxShape(), v.onnxShape())
		}
	}
	return nil
}

func eltwise(c *converter, l *Layer, in []*val) ([]*val, error) {
	if len(in) < 2 {
		return nil, fmt.Errorf("takes 2 or more bottoms, has %d", len(in))
	}
	if err := sameShapes(in); err != nil {
		return nil, err
	}
	p := l.Param.GetEltwiseParam()
	if p == nil {
		p = &netpb.EltwiseParameter{} // absent: every field at its default
	}
	names := make([]string, len(in))
	for i, v := range in {
		names[i] = v.name
	}
	var y string
	switch p.GetOperation() {
	case netpb.EltwiseParameter_PROD:
		y = names[0]
		for _, n := range names[1:] {
			y = c.Op1("Mul", y, n)
		}
	case netpb.EltwiseParameter_MAX:
		y = c.Op1("Max", names)
	default: // SUM
		coeff := p.GetCoeff()
		if len(coeff) != 0 && len(coeff) != len(in) {
			return nil, fmt.Errorf("eltwise_param has %d coeff values for %d bottoms; give one per bottom or none", len(coeff), len(in))
		}
		for i, n := range names {
			if len(coeff) > 0 && coeff[i] != 1 {
				n = c.Op1("Mul", n, c.scalar(coeff[i]))
			}
			if i == 0 {
				y = n
			} else {
				y = c.Op1("Add", y, n)
			}
		}
		if y == names[0] {
			y = c.Op1("Identity", y)
		}
	}
	return []*val{c.out(y, in[0].shape, in[0].bax)}, nil
}

func concat(c *converter, l *Layer, in []*val) ([]*val, error) {
	if len(in) < 1 {
		return nil, errors.New("takes 1 or more bottoms")
	}
	p := l.Param.GetConcatParam()
	if p == nil {
		p = &netpb.ConcatParameter{} // absent: every field at its default
	}
	a32 := p.GetAxis()
	if p.Axis == nil && p.ConcatDim != nil {
		a32 = int32(p.GetConcatDim())
	}
	axis, err := canonAxis(a32, in[0].rank())
	if err != nil {
		return nil, err
	}
	if err := noBatchAt(in[0], axis); err != nil {
		return nil, err
	}
	shape := slices.Clone(in[0].shape)
	names := []string{in[0].name}
	for _, v := range in[1:] {
		if v.rank() != len(shape) || v.bax != in[0].bax {
			return nil, fmt.Errorf("bottoms %v and %v cannot be joined along axis %d", in[0].onnxShape(), v.onnxShape(), axis)
		}
		for i := range shape {
			if i != axis && v.shape[i] != shape[i] {
				return nil, fmt.Errorf("bottoms %v and %v cannot be joined along axis %d", in[0].onnxShape(), v.onnxShape(), axis)
			}
		}
		shape[axis] += v.shape[axis]
		names = append(names, v.name)
	}
	if len(in) == 1 {
		return []*val{in[0]}, nil
	}
	return []*val{c.out(c.Op1("Concat", names, attrInt("axis", int64(axis))), shape, in[0].bax)}, nil
}

func slice(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetSliceParam()
	if p == nil {
		p = &netpb.SliceParameter{} // absent: every field at its default
	}
	a32 := p.GetAxis()
	if p.Axis == nil && p.SliceDim != nil {
		a32 = int32(p.GetSliceDim())
	}
	axis, err := canonAxis(a32, x.rank())
	if err != nil {
		return nil, err
	}
	if err := noBatchAt(x, axis); err != nil {
		return nil, err
	}
	n := len(l.Tops)
	dim := x.shape[axis]
	sizes := make([]int64, n)
	if pts := p.GetSlicePoint(); len(pts) > 0 {
		if len(pts) != n-1 {
			return nil, fmt.Errorf("%d slice_point values for %d tops; give one fewer than the tops", len(pts), n)
		}
		prev := int64(0)
		for i, pt := range pts {
			if int64(pt) <= prev || int64(pt) >= dim {
				return nil, fmt.Errorf("slice_point %v must increase strictly within (0, %d)", pts, dim)
			}
			sizes[i] = int64(pt) - prev
			prev = int64(pt)
		}
		sizes[n-1] = dim - prev
	} else {
		if dim%int64(n) != 0 {
			return nil, fmt.Errorf("axis %d of size %d does not split evenly into %d tops; give slice_point", axis, dim, n)
		}
		for i := range sizes {
			sizes[i] = dim / int64(n)
		}
	}
	if n == 1 {
		return []*val{x}, nil
	}
	names := c.OpN("Split", n, x.name, c.I64Const(sizes), attrInt("axis", int64(axis)))
	outs := make([]*val, n)
	for i := range outs {
		s := slices.Clone(x.shape)
		s[axis] = sizes[i]
		outs[i] = c.out(names[i], s, x.bax)
	}
	return outs, nil
}

// split copies its bottom to every top: the tops share the value.
func split(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	outs := make([]*val, len(l.Tops))
	for i := range outs {
		outs[i] = in[0]
	}
	return outs, nil
}

// reshapeTo emits a Reshape of x to shape (batch factor at bax).
func (c *converter) reshapeTo(x *val, shape []int64, bax int) *val {
	if slices.Equal(shape, x.shape) && bax == x.bax {
		return x
	}
	t := &val{shape: shape, bax: bax}
	return c.out(c.Op1("Reshape", x.name, c.I64Const(t.onnxShape())), shape, bax)
}

func flatten(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetFlattenParam()
	if p == nil {
		p = &netpb.FlattenParameter{} // absent: every field at its default
	}
	start, err := canonAxis(p.GetAxis(), x.rank())
	if err != nil {
		return nil, err
	}
	end, err := canonAxis(p.GetEndAxis(), x.rank())
	if err != nil {
		return nil, err
	}
	if end < start {
		return nil, fmt.Errorf("end_axis %d comes before axis %d", end, start)
	}
	shape := append(slices.Clone(x.shape[:start]), product(x.shape[start:end+1]))
	shape = append(shape, x.shape[end+1:]...)
	bax := x.bax
	switch {
	case bax < 0 || bax < start:
	case bax <= end:
		bax = start
	default:
		bax -= end - start
	}
	return []*val{c.reshapeTo(x, shape, bax)}, nil
}

// reshape follows Caffe's ReshapeParameter: dims replace axes
// [axis, axis+num_axes); 0 copies an input dim and one -1 is inferred. The
// batch must stay in a copied or inferred dim.
func reshape(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetReshapeParam()
	if p == nil {
		p = &netpb.ReshapeParameter{} // absent: every field at its default
	}
	dims := p.GetShape().GetDim()
	r := x.rank()
	start := int(p.GetAxis())
	if start < 0 {
		start += r + 1
	}
	if start < 0 || start > r {
		return nil, fmt.Errorf("axis %d is out of range for a blob of %d axes", p.GetAxis(), r)
	}
	end := r
	if na := p.GetNumAxes(); na != -1 {
		if na < 0 || start+int(na) > r {
			return nil, fmt.Errorf("num_axes %d from axis %d goes past the blob's %d axes", na, start, r)
		}
		end = start + int(na)
	}
	region := x.shape[start:end]
	out := make([]int64, len(dims))
	infer, newBax := -1, -1
	known := int64(1)
	for i, d := range dims {
		switch {
		case d == 0:
			if start+i >= end {
				return nil, fmt.Errorf("dim %d is 0 (copy) but the input has no axis %d in the reshaped range", i, start+i)
			}
			out[i] = x.shape[start+i]
			if start+i == x.bax {
				newBax = i
			}
		case d == -1:
			if infer >= 0 {
				return nil, errors.New("more than one dim is -1")
			}
			infer = i
			continue
		case d < 0:
			return nil, fmt.Errorf("dim %d is %d; dims are positive, 0 (copy) or -1 (infer)", i, d)
		default:
			out[i] = d
		}
		if out[i] > maxElements/known {
			return nil, fmt.Errorf("shape %v is too large", dims)
		}
		known *= out[i]
	}
	total := product(region)
	batchInRegion := x.bax >= start && x.bax < end
	if batchInRegion && newBax < 0 {
		if infer < 0 {
			return nil, fmt.Errorf("shape %v fixes the batch dimension; write 0 (copy) or -1 (infer) where the batch goes", dims)
		}
		newBax = infer
	}
	if infer >= 0 {
		if total%known != 0 {
			return nil, fmt.Errorf("cannot infer the -1 of shape %v from an input of shape %v", dims, x.onnxShape())
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("shape %v does not hold the %d values of axes %d..%d of the input %v", dims, total, start, end-1, x.onnxShape())
	}
	shape := append(slices.Clone(x.shape[:start]), out...)
	shape = append(shape, x.shape[end:]...)
	bax := x.bax
	switch {
	case bax < 0 || bax < start:
	case batchInRegion:
		bax = start + newBax
	default:
		bax += len(out) - (end - start)
	}
	return []*val{c.reshapeTo(x, shape, bax)}, nil
}

func softmax(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	axis, err := canonAxis(l.Param.GetSoftmaxParam().GetAxis(), x.rank())
	if err != nil {
		return nil, err
	}
	if err := noBatchAt(x, axis); err != nil {
		return nil, err
	}
	return []*val{c.out(c.Op1("Softmax", x.name, attrInt("axis", int64(axis))), x.shape, x.bax)}, nil
}

func lrn(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	if x.rank() != 4 || x.bax != 0 {
		return nil, fmt.Errorf("needs an N x C x H x W blob with the batch first, got shape %v", x.onnxShape())
	}
	p := l.Param.GetLrnParam()
	if p == nil {
		p = &netpb.LRNParameter{} // absent: every field at its default
	}
	size := int64(p.GetLocalSize())
	if size < 1 || size%2 == 0 {
		return nil, fmt.Errorf("local_size %d must be odd", size)
	}
	if p.GetNormRegion() == netpb.LRNParameter_ACROSS_CHANNELS {
		// x / (k + alpha/size * sum of x^2 over a window of channels)^beta,
		// built from pooling: ONNX Runtime's own LRN kernel is several
		// times slower on CPU. The channel window is a 3-D average pool
		// over [N, 1, C, H, W] with zeros outside, as Caffe pads.
		pad := (size - 1) / 2
		sq := c.Op1("Unsqueeze", c.Op1("Mul", x.name, x.name), c.I64Const([]int64{1}))
		avg := c.Op1("AveragePool", sq, attrInts("kernel_shape", []int64{size, 1, 1}), attrInts("pads", []int64{pad, 0, 0, pad, 0, 0}), attrInt("count_include_pad", 1))
		avg = c.Op1("Squeeze", avg, c.I64Const([]int64{1}))
		return []*val{c.out(c.Op1("Div", x.name, c.power(c.affine(avg, p.GetAlpha(), p.GetK()), p.GetBeta())), x.shape, 0)}, nil
	}
	// WITHIN_CHANNEL: x / (1 + alpha/size^2 * sum of x^2 over a size x size
	// window)^beta, the window zero-padded; Caffe ignores k here.
	pad := (size - 1) / 2
	sq := c.Op1("Mul", x.name, x.name)
	avg := c.Op1("AveragePool", sq, attrInts("kernel_shape", []int64{size, size}), attrInts("pads", []int64{pad, pad, pad, pad}), attrInt("count_include_pad", 1))
	den := c.power(c.affine(avg, p.GetAlpha(), 1), p.GetBeta())
	return []*val{c.out(c.Op1("Div", x.name, den), x.shape, 0)}, nil
}

// dropout is the identity at TEST time, or a scaling by 1 - ratio when
// scale_train is false (training then left activations unscaled).
func dropout(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	p := l.Param.GetDropoutParam()
	if p == nil {
		p = &netpb.DropoutParameter{} // absent: every field at its default
	}
	if p.GetScaleTrain() {
		return []*val{in[0]}, nil
	}
	x := in[0]
	return []*val{c.out(c.Op1("Mul", x.name, c.scalar(1-p.GetDropoutRatio())), x.shape, x.bax)}, nil
}

// crop cuts bottom 0 to the shape of bottom 1 on axes from axis on.
func crop(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 2, 2); err != nil {
		return nil, err
	}
	x, ref := in[0], in[1]
	if x.rank() != ref.rank() {
		return nil, fmt.Errorf("bottoms of shapes %v and %v have different ranks", x.onnxShape(), ref.onnxShape())
	}
	p := l.Param.GetCropParam()
	if p == nil {
		p = &netpb.CropParameter{} // absent: every field at its default
	}
	axis, err := canonAxis(p.GetAxis(), x.rank())
	if err != nil {
		return nil, err
	}
	if x.bax >= axis {
		return nil, fmt.Errorf("axis %d: cropping the batch axis %d is not supported", axis, x.bax)
	}
	offs := p.GetOffset()
	n := x.rank() - axis
	if len(offs) > 1 && len(offs) != n {
		return nil, fmt.Errorf("%d offsets for %d cropped axes; give 0, 1 or %d", len(offs), n, n)
	}
	shape := slices.Clone(x.shape)
	var starts, ends, axes []int64
	for i := axis; i < x.rank(); i++ {
		off := int64(0)
		switch len(offs) {
		case 1:
			off = int64(offs[0])
		case n:
			off = int64(offs[i-axis])
		}
		if off+ref.shape[i] > x.shape[i] {
			return nil, fmt.Errorf("axis %d: offset %d plus the reference size %d exceeds the input size %d", i, off, ref.shape[i], x.shape[i])
		}
		shape[i] = ref.shape[i]
		starts, ends, axes = append(starts, off), append(ends, off+ref.shape[i]), append(axes, int64(i))
	}
	y := c.Op1("Slice", x.name, c.I64Const(starts), c.I64Const(ends), c.I64Const(axes))
	return []*val{c.out(y, shape, x.bax)}, nil
}

// permute reorders axes; axes the order leaves out follow in their order.
func permute(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	var perm []int64
	seen := make([]bool, x.rank())
	for _, o := range l.Param.GetPermuteParam().GetOrder() {
		if int(o) >= x.rank() || seen[o] {
			return nil, fmt.Errorf("order %v must list distinct axes below %d", l.Param.GetPermuteParam().GetOrder(), x.rank())
		}
		seen[o] = true
		perm = append(perm, int64(o))
	}
	for i, s := range seen {
		if !s {
			perm = append(perm, int64(i))
		}
	}
	shape := make([]int64, len(perm))
	bax := -1
	for i, a := range perm {
		shape[i] = x.shape[a]
		if int(a) == x.bax {
			bax = i
		}
	}
	return []*val{c.out(c.Op1("Transpose", x.name, attrInts("perm", perm)), shape, bax)}, nil
}

// argMax returns the top_k indexes (as floats), or with out_max_val the
// values (along an axis) or index/value pairs (over each sample). Ties go
// to the lower index (Caffe's sort leaves their order unspecified).
func argMax(c *converter, l *Layer, in []*val) ([]*val, error) {
	if err := bottoms(in, 1, 1); err != nil {
		return nil, err
	}
	x := in[0]
	p := l.Param.GetArgmaxParam()
	if p == nil {
		p = &netpb.ArgMaxParameter{} // absent: every field at its default
	}
	k := int64(p.GetTopK())
	if k < 1 {
		return nil, errors.New("top_k must be positive")
	}
	if p.Axis != nil {
		axis, err := canonAxis(p.GetAxis(), x.rank())
		if err != nil {
			return nil, err
		}
		if err := noBatchAt(x, axis); err != nil {
			return nil, err
		}
		if k > x.shape[axis] {
			return nil, fmt.Errorf("top_k %d is larger than axis %d (%d)", k, axis, x.shape[axis])
		}
		tk := c.OpN("TopK", 2, x.name, c.I64Const([]int64{k}), attrInt("axis", int64(axis)))
		y := tk[0]
		if !p.GetOutMaxVal() {
			y = c.Op1("Cast", tk[1], attrInt("to", onnxFloat))
		}
		shape := slices.Clone(x.shape)
		shape[axis] = k
		return []*val{c.out(y, shape, x.bax)}, nil
	}
	if x.bax != 0 || x.shape[0] != 1 {
		return nil, fmt.Errorf("without an axis it works per sample and needs the batch first, got shape %v", x.onnxShape())
	}
	d := product(x.shape[1:])
	if k > d {
		return nil, fmt.Errorf("top_k %d is larger than the %d values per sample", k, d)
	}
	flat := x.name
	if x.rank() != 2 {
		flat = c.Op1("Flatten", x.name, attrInt("axis", 1))
	}
	tk := c.OpN("TopK", 2, flat, c.I64Const([]int64{k}), attrInt("axis", 1))
	idx := c.Op1("Unsqueeze", c.Op1("Cast", tk[1], attrInt("to", onnxFloat)), c.I64Const([]int64{1}))
	y, rows := idx, int64(1)
	if p.GetOutMaxVal() {
		y = c.Op1("Concat", idx, c.Op1("Unsqueeze", tk[0], c.I64Const([]int64{1})), attrInt("axis", 1))
		rows = 2
	}
	// Caffe's top has max(rank, 3) axes: N x (1|2) x top_k x 1 ...
	shape := []int64{1, rows, k}
	for len(shape) < x.rank() {
		shape = append(shape, 1)
	}
	v := c.out(y, []int64{1, rows, k}, 0)
	return []*val{c.reshapeTo(v, shape, 0)}, nil
}

var onnxFloat = onnxbuild.Type(tensor.Float32)
