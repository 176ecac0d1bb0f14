package pmml

import (
	"math"
	"strconv"
)

// anomalyModel is PMML 4.4's AnomalyDetectionModel: an embedded model whose
// prediction becomes an anomaly score.
type anomalyModel struct {
	algo     string // iforest, ocsvm, clusterMeanDist, other
	inner    *model
	n        float64 // sampleDataSize (iforest)
	meanDist []float64
}

func (cc *compiler) anomaly(n *node, m *model, sc *scope) error {
	a := &anomalyModel{algo: n.attr("algorithmType")}
	switch a.algo {
	case "iforest", "ocsvm", "clusterMeanDist", "other":
	default:
		return n.unsupported("algorithmType " + strconv.Quote(a.algo))
	}
	var err error
	if a.n, err = n.float("sampleDataSize", 0); err != nil {
		return err
	}
	if a.algo == "iforest" && a.n < 2 {
		return n.errf("iforest needs sampleDataSize of 2 or more, got %g", a.n)
	}
	for _, c := range n.children {
		switch {
		case modelElements[c.name]:
			if a.inner != nil {
				return c.errf("AnomalyDetectionModel holds more than one model")
			}
			inner, _, err := cc.compileModel(c, sc)
			if err != nil {
				return err
			}
			a.inner = inner
		case c.name == "MeanClusterDistances":
			arr := c.child("Array")
			if arr == nil {
				return c.errf("MeanClusterDistances without an Array")
			}
			if a.meanDist, err = parseNumArray(arr); err != nil {
				return err
			}
		case c.name == "MiningSchema" || c.name == "Output" || c.name == "LocalTransformations" || c.name == "ModelVerification" || ignorable(c.name):
		default:
			return c.unsupported("")
		}
	}
	if a.inner == nil {
		return n.errf("AnomalyDetectionModel without an embedded model")
	}
	if a.algo == "clusterMeanDist" {
		if a.inner.fn != "clustering" {
			return n.errf("clusterMeanDist needs an embedded clustering model, got %s", a.inner.kind)
		}
		if ids := a.inner.impl.(interface{ entityIDs() []Value }).entityIDs(); len(ids) != len(a.meanDist) {
			return n.errf("MeanClusterDistances has %d values for %d clusters", len(a.meanDist), len(ids))
		}
	}
	m.impl = a
	return nil
}

// avgPathLength is c(n), the average path length of an unsuccessful search
// in a binary search tree of n points, which normalises isolation depths.
func avgPathLength(n float64) float64 {
	if n <= 1 {
		return 0
	}
	const euler = 0.5772156649015329
	return 2*(math.Log(n-1)+euler) - 2*(n-1)/n
}

func (a *anomalyModel) score(c *ctx, m *model, p *prediction) {
	r := c.eval(a.inner)
	if !r.ok {
		return
	}
	switch a.algo {
	case "iforest":
		if r.val.K != Float {
			return
		}
		p.val = FloatValue(math.Pow(2, -r.val.F/avgPathLength(a.n)))
	case "clusterMeanDist":
		if r.ent < 0 || r.ent >= len(r.affin) || a.meanDist[r.ent] == 0 {
			return
		}
		p.val = FloatValue(r.affin[r.ent] / a.meanDist[r.ent])
	default:
		if r.val.K != Float {
			return
		}
		p.val = r.val
	}
	p.ok = true
}
