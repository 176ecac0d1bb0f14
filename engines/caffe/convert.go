package caffe

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/internal/humanize"
	"github.com/eas-server/eas-server/tensor"
)

// Port is one input or output blob of the translated model. Shape has -1
// where the batch goes.
type Port struct {
	Name  string
	Shape []int64
}

// Model is a translated network.
type Model struct {
	// ONNX is a serialized ONNX ModelProto.
	ONNX    []byte
	Inputs  []Port
	Outputs []Port
	// Blobs names every blob that Options.Outputs may ask for (all but the
	// inputs), in the order layers make them.
	Blobs []string
	// Batchable is true when every input and output has the batch as its
	// first dimension, so requests can be concatenated along it.
	Batchable bool
}

// Options tune a translation.
type Options struct {
	// Outputs lists the blobs the model returns; empty means the network's
	// outputs (blobs no layer consumes).
	Outputs []string
}

// UnsupportedError lists the layers a network uses that cannot be
// translated.
type UnsupportedError struct {
	Types map[string][]string // layer type -> layer names
}

func (e *UnsupportedError) Error() string {
	types := make([]string, 0, len(e.Types))
	for t := range e.Types {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s (%s)", t, strings.Join(humanize.FirstN(e.Types[t], 5), ", "))
	}
	return fmt.Sprintf("the network uses Caffe layers that cannot be translated to ONNX: %s; the supported layers are %s. "+
		"Remove or replace them (training-only layers such as data and loss layers do not belong in a deploy.prototxt), "+
		"or convert the model to ONNX yourself and deploy it with onnx_cpu",
		strings.Join(parts, "; "), strings.Join(SupportedLayers(), ", "))
}

// SupportedLayers lists the layer types the translation handles.
func SupportedLayers() []string {
	out := make([]string, 0, len(layerFuncs)+1)
	for t := range layerFuncs {
		out = append(out, t)
	}
	out = append(out, "Input")
	sort.Strings(out)
	return out
}

// val is the ONNX value a blob holds at some point of the network. shape
// has the per-sample factor of the batch at axis bax (-1: no batch axis).
type val struct {
	name  string
	shape []int64
	bax   int
}

// onnxShape is the shape with -1 at the batch axis.
func (v *val) onnxShape() []int64 {
	s := slices.Clone(v.shape)
	if v.bax >= 0 {
		s[v.bax] = -1
	}
	return s
}

func (v *val) rank() int { return len(v.shape) }

type converter struct {
	onnxbuild.Graph
	net   *Net
	layer *Layer
	// needs, when set, collects the trained blob shapes each layer needs
	// (WeightShapes) and lets missing blobs read as zeros.
	needs map[string][][]int64
}

type layerFunc func(c *converter, l *Layer, in []*val) ([]*val, error)

// Convert translates net into an ONNX model whose first input dimension is
// the batch, whatever size the definition declares.
func Convert(net *Net, opts Options) (*Model, error) {
	return convert(net, opts, nil)
}

// WeightShapes lists, by layer name, the shapes of the trained blobs each
// layer of net needs, as Caffe stores them: what a weights file for this
// definition must hold. The net's own blobs may be absent.
func WeightShapes(net *Net) (map[string][][]int64, error) {
	needs := map[string][][]int64{}
	if _, err := convert(net, Options{}, needs); err != nil {
		return nil, err
	}
	return needs, nil
}

func convert(net *Net, opts Options, needs map[string][][]int64) (*Model, error) {
	unsup := map[string][]string{}
	for _, l := range net.Layers {
		if _, ok := layerFuncs[l.Type]; !ok && l.Type != "Input" {
			unsup[l.Type] = append(unsup[l.Type], l.Name)
		}
	}
	if len(unsup) > 0 {
		return nil, &UnsupportedError{Types: unsup}
	}
	c := &converter{net: net, Graph: onnxbuild.Graph{Prefix: "_caffe/"}, needs: needs}
	graph := &onnxpb.GraphProto{Name: net.Name}
	if graph.Name == "" {
		graph.Name = "caffe"
	}
	m := &Model{Batchable: true}
	blobs := map[string]*val{}
	consumed := map[string]bool{}
	var order []string // blobs in the order they are first written
	isInput := map[string]bool{}
	addInput := func(name string, shape []int64) error {
		if name == "" {
			return errors.New("an input has no name")
		}
		if isInput[name] {
			return fmt.Errorf("input %q is declared twice", name)
		}
		if len(shape) == 0 {
			return fmt.Errorf("input %q has no shape; declare it (input_param { shape { dim: 1 dim: 3 dim: 224 dim: 224 } }), the first dimension being the batch", name)
		}
		per := slices.Clone(shape)
		per[0] = 1
		if _, ok := count(per); !ok {
			return fmt.Errorf("input %q: shape %v must have positive dimensions and at most %d elements per sample", name, shape, int64(maxElements))
		}
		isInput[name] = true
		v := &val{name: name, shape: per, bax: 0}
		blobs[name] = v
		p := Port{Name: name, Shape: v.onnxShape()}
		m.Inputs = append(m.Inputs, p)
		graph.Input = append(graph.Input, onnxbuild.ValueInfo(name, tensor.Float32, p.Shape))
		return nil
	}
	for _, in := range net.Inputs {
		if err := addInput(in.Name, in.Shape); err != nil {
			return nil, err
		}
	}
	for _, l := range net.Layers {
		c.layer = l
		if l.Type == "Input" {
			shapes := l.Param.GetInputParam().GetShape()
			if len(shapes) > 1 && len(shapes) != len(l.Tops) {
				return nil, fmt.Errorf("layer %q (Input): %d tops need 1 or %d shapes, got %d", l.Name, len(l.Tops), len(l.Tops), len(shapes))
			}
			for i, top := range l.Tops {
				var dims []int64
				switch len(shapes) {
				case 0:
				case 1:
					dims = shapes[0].GetDim()
				default:
					dims = shapes[i].GetDim()
				}
				if err := addInput(top, dims); err != nil {
					return nil, fmt.Errorf("layer %q (Input): %w", l.Name, err)
				}
			}
			continue
		}
		in := make([]*val, len(l.Bottoms))
		for i, b := range l.Bottoms {
			v, ok := blobs[b]
			if !ok {
				return nil, fmt.Errorf("layer %q (%s): bottom %q is made by no earlier layer or input", l.Name, l.Type, b)
			}
			in[i] = v
			consumed[b] = true
		}
		outs, err := layerFuncs[l.Type](c, l, in)
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s): %w", l.Name, l.Type, err)
		}
		if len(outs) != len(l.Tops) {
			return nil, fmt.Errorf("layer %q (%s): has %d tops, makes %d", l.Name, l.Type, len(l.Tops), len(outs))
		}
		for i, top := range l.Tops {
			if isInput[top] {
				return nil, fmt.Errorf("layer %q (%s): writes input blob %q in place; inputs cannot be overwritten here", l.Name, l.Type, top)
			}
			if _, ok := blobs[top]; !ok {
				order = append(order, top)
			}
			blobs[top] = outs[i]
			consumed[top] = false
		}
	}
	m.Blobs = order
	want := opts.Outputs
	if len(want) == 0 {
		for _, b := range order {
			if !consumed[b] {
				want = append(want, b)
			}
		}
		if len(want) == 0 {
			return nil, errors.New("the network has no output: every blob is consumed by a layer")
		}
	}
	for _, name := range want {
		v, ok := blobs[name]
		if !ok || isInput[name] {
			return nil, fmt.Errorf("no blob %q to output; the network's blobs are %s", name, strings.Join(order, ", "))
		}
		c.Emit("Identity", []string{v.name}, []string{name})
		p := Port{Name: name, Shape: v.onnxShape()}
		m.Outputs = append(m.Outputs, p)
		graph.Output = append(graph.Output, onnxbuild.ValueInfo(name, tensor.Float32, p.Shape))
		if v.bax != 0 || v.shape[0] != 1 {
			m.Batchable = false
		}
	}
	if len(m.Inputs) == 0 {
		return nil, errors.New("the network declares no input (an Input layer, or input with input_shape)")
	}
	graph.Node = c.Nodes
	graph.Initializer = c.Inits
	b, err := onnxbuild.Model(graph, "eas-server caffe")
	if err != nil {
		return nil, fmt.Errorf("encode onnx model: %w", err)
	}
	m.ONNX = b
	return m, nil
}
