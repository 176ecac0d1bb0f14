package easycv

import (
	"cmp"
	"slices"
)

// detection is one row of EasyCV's postprocess output: corners, objectness,
// the best class's score and that class.
type detection struct {
	box      [4]float32 // x1, y1, x2, y2
	obj, cls float32
	class    int
}

// yoloxPostprocess is EasyCV's postprocess (easycv/models/detection/utils/
// postprocess.py) for one image's decoded predictions pred ([anchors,
// width] row-major, width >= 5 + nc: cx, cy, w, h, objectness, class
// scores): corners from centres; the best of the first nc class scores
// (the first on a tie, as torch.max); keep objectness * score >= conf;
// class-aware NMS at iou (torchvision's batched_nms). nil when nothing
// passes conf (EasyCV's None); otherwise the kept detections, highest score
// first. The arithmetic is float32, in torch's order.
func yoloxPostprocess(pred []float32, anchors, width, nc int, conf float32, iou float64) []detection {
	var cand []detection
	for a := 0; a < anchors; a++ {
		r := pred[a*width : (a+1)*width]
		best := 0
		for c := 1; c < nc; c++ {
			if r[5+c] > r[5+best] {
				best = c
			}
		}
		d := detection{
			box: [4]float32{r[0] - r[2]/2, r[1] - r[3]/2, r[0] + r[2]/2, r[1] + r[3]/2},
			obj: r[4], cls: r[5+best], class: best,
		}
		if d.obj*d.cls >= conf {
			cand = append(cand, d)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	return batchedNMS(cand, iou)
}

// batchedNMS is torchvision's batched_nms: NMS within each class, the kept
// boxes of every class ordered by score, highest first. A box is dropped
// when its IoU with a kept, higher-scored box of its class is over iou.
// (torchvision's coordinate trick, which offsets each class's boxes to
// keep classes apart, gives the same answer but for the last bits of an
// IoU.)
func batchedNMS(dets []detection, iou float64) []detection {
	order := make([]int, len(dets))
	for i := range order {
		order[i] = i
	}
	score := func(i int) float32 { return dets[i].obj * dets[i].cls }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score(b), score(a)) })
	area := func(d detection) float32 { return (d.box[2] - d.box[0]) * (d.box[3] - d.box[1]) }
	suppressed := make([]bool, len(dets))
	var kept []detection
	for oi, i := range order {
		if suppressed[i] {
			continue
		}
		di := dets[i]
		kept = append(kept, di)
		ai := area(di)
		for _, j := range order[oi+1:] {
			dj := dets[j]
			if suppressed[j] || dj.class != di.class {
				continue
			}
			w := max(0, min(di.box[2], dj.box[2])-max(di.box[0], dj.box[0]))
			h := max(0, min(di.box[3], dj.box[3])-max(di.box[1], dj.box[1]))
			inter := w * h
			if float64(inter/(ai+area(dj)-inter)) > iou { // float IoU against the double threshold, as torchvision's kernel
				suppressed[j] = true
			}
		}
	}
	return kept
}
