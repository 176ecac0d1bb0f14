package pmml

import (
	"math"
	"strconv"
)

type clusterField struct {
	src     expr
	weight  float64
	compare string
	scale   float64
}

type clusteringModel struct {
	kind     string // distance or similarity
	measure  string
	p        float64
	fields   []clusterField
	centers  [][]float64
	ids      []Value
	names    []string
	missingW []float64
	compare  string
}

func (cc *compiler) clustering(n *node, m *model, sc *scope) error {
	if mc := n.attrOr("modelClass", "centerBased"); mc != "centerBased" {
		return n.unsupported("modelClass " + strconv.Quote(mc))
	}
	cm := &clusteringModel{}
	for _, c := range n.children {
		switch c.name {
		case "ComparisonMeasure":
			cm.kind = c.attrOr("kind", "distance")
			cm.compare = c.attrOr("compareFunction", "absDiff")
			for _, ms := range c.children {
				switch ms.name {
				case "euclidean", "squaredEuclidean", "chebychev", "cityBlock", "minkowski":
					cm.measure = ms.name
					var err error
					if cm.p, err = ms.float("p-parameter", 2); err != nil {
						return err
					}
				case "simpleMatching", "jaccard", "tanimoto", "binarySimilarity":
					return ms.unsupported("comparison measure")
				case "Extension":
				default:
					return ms.unsupported("")
				}
			}
		case "ClusteringField":
			if c.attr("isCenterField") == "false" {
				continue
			}
			src, err := cc.resolve(c, c.attr("field"), sc, nil, MissingValue)
			if err != nil {
				return err
			}
			f := clusterField{src: src, compare: c.attr("compareFunction")}
			if f.weight, err = c.float("fieldWeight", 1); err != nil {
				return err
			}
			if f.scale, err = c.float("similarityScale", 1); err != nil {
				return err
			}
			cm.fields = append(cm.fields, f)
		case "Cluster":
			arr := c.child("Array")
			if arr == nil {
				return c.errf("Cluster without a center Array")
			}
			ctr, err := parseNumArray(arr)
			if err != nil {
				return err
			}
			id := FloatValue(float64(len(cm.centers) + 1))
			if c.has("id") {
				id, _ = parseConst(c.attr("id"), TypeUnknown)
			}
			cm.centers = append(cm.centers, ctr)
			cm.ids = append(cm.ids, id)
			cm.names = append(cm.names, c.attr("name"))
		case "MissingValueWeights":
			arr := c.child("Array")
			if arr != nil {
				w, err := parseNumArray(arr)
				if err != nil {
					return err
				}
				cm.missingW = w
			}
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "CenterFields":
		default:
			return c.unsupported("")
		}
	}
	if cm.measure == "" {
		return n.errf("ClusteringModel without a ComparisonMeasure")
	}
	for i := range cm.fields {
		if cm.fields[i].compare == "" {
			cm.fields[i].compare = cm.compare
		}
		switch cm.fields[i].compare {
		case "absDiff", "gaussSim", "delta", "equal":
		default:
			return n.unsupported("compareFunction " + strconv.Quote(cm.fields[i].compare))
		}
	}
	for i, ctr := range cm.centers {
		if len(ctr) != len(cm.fields) {
			return n.errf("cluster %d has %d center values for %d clustering fields", i+1, len(ctr), len(cm.fields))
		}
	}
	if len(cm.centers) == 0 {
		return n.errf("ClusteringModel without Clusters")
	}
	if cm.missingW != nil && len(cm.missingW) != len(cm.fields) {
		return n.errf("MissingValueWeights has %d values for %d clustering fields", len(cm.missingW), len(cm.fields))
	}
	m.impl = cm
	m.scratch = len(cm.fields) + len(cm.centers) + len(cm.fields)
	return nil
}

func (cm *clusteringModel) entityIDs() []Value { return cm.ids }

func (cm *clusteringModel) entityIndex(id string) int {
	for i, v := range cm.ids {
		if v.String() == id {
			return i
		}
	}
	return -1
}

func (cm *clusteringModel) displayName(i int) string {
	if cm.names[i] != "" {
		return cm.names[i]
	}
	return cm.ids[i].String()
}

func (cm *clusteringModel) score(c *ctx, m *model, p *prediction) {
	nf := len(cm.fields)
	x := p.scratch[:nf]
	present := p.scratch[nf+len(cm.centers):]
	anyPresent := false
	for i, f := range cm.fields {
		v := f.src.eval(c)
		fv, ok := v.num()
		if v.K == Missing || !ok {
			present[i] = 0
			continue
		}
		present[i] = 1
		x[i] = fv
		anyPresent = true
	}
	if !anyPresent {
		return
	}
	adjust := 1.0
	{
		all, some := 0.0, 0.0
		for i := range cm.fields {
			q := 1.0
			if cm.missingW != nil {
				q = cm.missingW[i]
			}
			all += q
			if present[i] != 0 {
				some += q
			}
		}
		if some > 0 {
			adjust = all / some
		}
	}
	d := p.scratch[nf : nf+len(cm.centers)]
	best := -1
	for k, ctr := range cm.centers {
		acc := 0.0
		for i := range cm.fields {
			if present[i] == 0 {
				continue
			}
			f := &cm.fields[i]
			var cv float64
			switch f.compare {
			case "absDiff":
				cv = math.Abs(x[i] - ctr[i])
			case "gaussSim":
				t := x[i] - ctr[i]
				cv = math.Exp(-math.Ln2 * t * t / (f.scale * f.scale))
			case "delta":
				if x[i] != ctr[i] {
					cv = 1
				}
			case "equal":
				if x[i] == ctr[i] {
					cv = 1
				}
			}
			switch cm.measure {
			case "euclidean", "squaredEuclidean":
				acc += f.weight * cv * cv
			case "cityBlock":
				acc += f.weight * cv
			case "chebychev":
				acc = math.Max(acc, f.weight*cv)
			case "minkowski":
				acc += f.weight * math.Pow(cv, cm.p)
			}
		}
		switch cm.measure {
		case "euclidean":
			acc = math.Sqrt(acc * adjust)
		case "minkowski":
			acc = math.Pow(acc*adjust, 1/cm.p)
		case "chebychev":
		default:
			acc *= adjust
		}
		d[k] = acc
		if best < 0 || cm.kind == "distance" && acc < d[best] || cm.kind == "similarity" && acc > d[best] {
			best = k
		}
	}
	p.ok = true
	p.ent = best
	p.entity = cm.ids[best]
	p.val = cm.ids[best]
	p.affin = d
}
