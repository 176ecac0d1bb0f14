package pmml

import (
	"math"
	"sort"
)

type neuron struct {
	bias   float64
	from   []int
	w      []float64
	width  float64
	alt    float64
	hasW   bool
	hasAlt bool
}

type neuralLayer struct {
	act       string
	threshold float64
	width     float64
	altitude  float64
	norm      string
	start     int // index of the first neuron in the value array
	neurons   []neuron
}

type neuralOutput struct {
	idx  int
	cat  int // classification: category the neuron gives the probability of
	norm *normContinuous
}

type neuralNet struct {
	inputs  []expr
	layers  []neuralLayer
	outputs []neuralOutput
	n       int
}

var activations = map[string]bool{
	"threshold": true, "logistic": true, "tanh": true, "identity": true, "exponential": true, "reciprocal": true,
	"square": true, "Gauss": true, "sine": true, "cosine": true, "Elliott": true, "arctan": true, "rectifier": true,
	"radialBasis": true,
}

func (cc *compiler) neural(n *node, m *model, sc *scope) error {
	nn := &neuralNet{}
	act := n.attr("activationFunction")
	if !activations[act] {
		return n.errf("activationFunction %q is not a PMML activation function", act)
	}
	threshold, err := n.float("threshold", 0)
	if err != nil {
		return err
	}
	width, err := n.float("width", math.NaN())
	if err != nil {
		return err
	}
	altitude, err := n.float("altitude", 1)
	if err != nil {
		return err
	}
	norm := n.attrOr("normalizationMethod", "none")
	ids := map[string]int{}
	for _, c := range n.children {
		switch c.name {
		case "NeuralInputs":
			for _, in := range c.all("NeuralInput") {
				df := in.child("DerivedField")
				if df == nil {
					return in.errf("NeuralInput without a DerivedField")
				}
				e, err := cc.exprOf(df, sc, nil)
				if err != nil {
					return err
				}
				ids[in.attr("id")] = len(nn.inputs)
				nn.inputs = append(nn.inputs, e)
			}
			nn.n = len(nn.inputs)
		case "NeuralLayer":
			l := neuralLayer{act: c.attrOr("activationFunction", act), norm: c.attrOr("normalizationMethod", norm), start: nn.n}
			if !activations[l.act] {
				return c.errf("activationFunction %q is not a PMML activation function", l.act)
			}
			switch l.norm {
			case "none", "simplemax", "softmax":
			default:
				return c.errf("normalizationMethod %q is not none, simplemax or softmax", l.norm)
			}
			if l.threshold, err = c.float("threshold", threshold); err != nil {
				return err
			}
			if l.width, err = c.float("width", width); err != nil {
				return err
			}
			if l.altitude, err = c.float("altitude", altitude); err != nil {
				return err
			}
			for _, ne := range c.all("Neuron") {
				nr := neuron{}
				if nr.bias, err = ne.float("bias", 0); err != nil {
					return err
				}
				nr.hasW, nr.hasAlt = ne.has("width"), ne.has("altitude")
				if nr.width, err = ne.float("width", l.width); err != nil {
					return err
				}
				if nr.alt, err = ne.float("altitude", l.altitude); err != nil {
					return err
				}
				for _, con := range ne.all("Con") {
					fi, ok := ids[con.attr("from")]
					if !ok {
						return con.errf("from=%q names no earlier neuron or input", con.attr("from"))
					}
					w, err := con.float("weight", 0)
					if err != nil {
						return err
					}
					nr.from = append(nr.from, fi)
					nr.w = append(nr.w, w)
				}
				ids[ne.attr("id")] = nn.n
				nn.n++
				l.neurons = append(l.neurons, nr)
			}
			nn.layers = append(nn.layers, l)
		case "NeuralOutputs":
			for _, o := range c.all("NeuralOutput") {
				idx, ok := ids[o.attr("outputNeuron")]
				if !ok {
					return o.errf("outputNeuron %q names no neuron", o.attr("outputNeuron"))
				}
				no := neuralOutput{idx: idx, cat: -1}
				df := o.child("DerivedField")
				if df == nil {
					return o.errf("NeuralOutput without a DerivedField")
				}
				var ex *node
				for _, e := range df.children {
					if isExpression(e.name) {
						ex = e
					}
				}
				if ex == nil {
					return df.errf("no expression inside")
				}
				switch ex.name {
				case "NormDiscrete":
					if !m.classification() {
						return ex.errf("NormDiscrete output in a %s network", m.fn)
					}
					no.cat = m.catIndex(m.catValue(ex.attr("value")))
				case "NormContinuous":
					e, err := cc.normContinuous(ex, sc, nil)
					if err != nil {
						return err
					}
					no.norm = e.(*normContinuous)
				case "FieldRef":
				default:
					return ex.unsupported("neural output expression")
				}
				nn.outputs = append(nn.outputs, no)
			}
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension":
		default:
			return c.unsupported("")
		}
	}
	if len(nn.layers) == 0 || len(nn.outputs) == 0 {
		return n.errf("NeuralNetwork needs NeuralLayers and NeuralOutputs")
	}
	for _, l := range nn.layers {
		if l.act == "radialBasis" && math.IsNaN(l.width) {
			for _, nr := range l.neurons {
				if !nr.hasW {
					return n.errf("radialBasis activation needs a width")
				}
			}
		}
	}
	m.impl = nn
	m.scratch = nn.n
	return nil
}

func activate(act string, z, threshold float64) float64 {
	switch act {
	case "threshold":
		if z > threshold {
			return 1
		}
		return 0
	case "logistic":
		return 1 / (1 + math.Exp(-z))
	case "tanh":
		return math.Tanh(z)
	case "exponential":
		return math.Exp(z)
	case "reciprocal":
		return 1 / z
	case "square":
		return z * z
	case "Gauss":
		return math.Exp(-z * z)
	case "sine":
		return math.Sin(z)
	case "cosine":
		return math.Cos(z)
	case "Elliott":
		return z / (1 + math.Abs(z))
	case "arctan":
		return 2 * math.Atan(z) / math.Pi
	case "rectifier":
		return math.Max(0, z)
	}
	return z
}

func (nn *neuralNet) score(c *ctx, m *model, p *prediction) {
	v := p.scratch[:nn.n]
	for i, in := range nn.inputs {
		x := in.eval(c)
		f, ok := x.num()
		if x.K == Missing || !ok {
			return
		}
		v[i] = f
	}
	for li := range nn.layers {
		l := &nn.layers[li]
		for j := range l.neurons {
			nr := &l.neurons[j]
			var out float64
			if l.act == "radialBasis" {
				z := 0.0
				for k, fi := range nr.from {
					d := v[fi] - nr.w[k]
					z += d * d
				}
				z /= 2 * nr.width * nr.width
				out = math.Exp(float64(len(nr.from))*math.Log(nr.alt) - z)
			} else {
				z := nr.bias
				for k, fi := range nr.from {
					z += nr.w[k] * v[fi]
				}
				out = activate(l.act, z, l.threshold)
			}
			v[l.start+j] = out
		}
		out := v[l.start : l.start+len(l.neurons)]
		switch l.norm {
		case "softmax":
			mx := math.Inf(-1)
			for _, x := range out {
				mx = math.Max(mx, x)
			}
			s := 0.0
			for i, x := range out {
				out[i] = math.Exp(x - mx)
				s += out[i]
			}
			for i := range out {
				out[i] /= s
			}
		case "simplemax":
			s := 0.0
			for _, x := range out {
				s += x
			}
			for i := range out {
				out[i] /= s
			}
		}
	}
	if m.classification() {
		probs := p.ownProbs(len(m.cats))
		for _, o := range nn.outputs {
			if o.cat >= 0 {
				probs[o.cat] = v[o.idx]
			}
		}
		p.setCatFromProbs(m)
		return
	}
	o := nn.outputs[0]
	y := v[o.idx]
	if o.norm != nil {
		y = o.norm.invert(y)
	}
	p.ok = true
	p.val = FloatValue(y)
}

// invert maps a normalised value back to the original scale.
func (e *normContinuous) invert(y float64) float64 {
	n := len(e.ys)
	i := 0
	if e.ys[n-1] >= e.ys[0] {
		i = sort.SearchFloat64s(e.ys, y) - 1
	} else {
		for i = 0; i < n-2 && !(y <= e.ys[i] && y >= e.ys[i+1]); i++ {
		}
	}
	if i < 0 {
		i = 0
	}
	if i > n-2 {
		i = n - 2
	}
	return e.xs[i] + (y-e.ys[i])/(e.ys[i+1]-e.ys[i])*(e.xs[i+1]-e.xs[i])
}
