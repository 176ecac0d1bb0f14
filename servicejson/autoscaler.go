package servicejson

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// scaleInput is the autoscaler strategies as the document gave them, in
// either form, before validateAutoscaler checks them.
type scaleInput struct {
	byKey map[string]float64 // autoscaler.strategies, by the key as written
	list  []json.RawMessage  // autoscaler.scaleStrategies, elements as given
}

// strategyKeys are the keys of one autoscaler.scaleStrategies element.
var strategyKeys = []string{"metricName", "threshold"}

// maxQPSThreshold bounds a qps threshold as metadata.rpc.rate_limit is
// bounded; it also keeps the value one a Kubernetes quantity holds exactly.
const maxQPSThreshold = 1000000

const strategyExample = `{"metricName": "qps", "threshold": 10}`

// metricProblem says why metric (trimmed, lowercased) is not one this server
// scales on, or "" when it is. It follows `metric "x" `.
func metricProblem(metric string) string {
	switch metric {
	case MetricQPS, MetricCPU:
		return ""
	case "":
		return "is empty; name qps or cpu"
	}
	return "is not supported: this server scales on qps and cpu only; remove it, or scale on qps (requests per second per instance) or cpu (percent of the requested CPU)"
}

// thresholdProblem says what is wrong with x as the threshold of metric, or
// "" when nothing is. It follows "must".
func thresholdProblem(metric string, x float64) string {
	switch metric {
	case MetricCPU:
		if x != math.Trunc(x) || x < 1 || x > 100 {
			return fmt.Sprintf("be a whole percent between 1 and 100, got %s; the cpu threshold is the average CPU use in percent of the requested CPU, e.g. 80", short(x))
		}
	case MetricQPS:
		if x <= 0 || x > maxQPSThreshold {
			return fmt.Sprintf("be greater than 0 and at most 1000000, got %s; the qps threshold is the requests per second each instance should take, e.g. 10", short(x))
		}
	}
	return ""
}

// short writes x as num does, or in exponent form when that would be long
// (1e+300, 1e-30), so that a message stays readable.
func short(x float64) string {
	if s := num(x); len(s) <= 24 {
		return s
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// validateAutoscaler checks the autoscaler section as a whole: min and max,
// the strategies of both forms (one per metric, qps or cpu, valid
// thresholds), and metadata.instance as the starting count. It fills
// Autoscaler.Strategies.
func validateAutoscaler(s *Service, errs *Errors) {
	a := s.Autoscaler
	in := s.scale
	s.scale = scaleInput{}
	if a == nil {
		return
	}
	bounded := false
	if !s.given["autoscaler.min"] || !s.given["autoscaler.max"] {
		errs.add("autoscaler", `needs both min and max; write "autoscaler": {"min": 1, "max": 5, "scaleStrategies": [%s]}`, strategyExample)
	} else if a.Min > a.Max {
		errs.add("autoscaler.min", "must not exceed autoscaler.max, got min %d and max %d; swap them or raise max", a.Min, a.Max)
	} else {
		bounded = true
	}
	if m := s.Metadata.Instance; bounded && s.given["metadata.instance"] && (m < a.Min || m > a.Max) {
		errs.add("metadata.instance", "is %d, outside autoscaler.min %d .. autoscaler.max %d; the autoscaler starts from metadata.instance, so set it between %d and %d or widen autoscaler.min/max",
			m, a.Min, a.Max, a.Min, a.Max)
	}

	// where says where each metric was first given, for the duplicate check.
	where := map[string]string{}
	var out []ScaleStrategy

	// The older form: a map. Its keys are unique as written (walker.apply
	// refuses one key with two values), but QPS and qps are one metric.
	keys := make([]string, 0, len(in.byKey))
	for k := range in.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		path := "autoscaler.strategies." + k
		metric, x := strings.ToLower(strings.TrimSpace(k)), in.byKey[k]
		if p := metricProblem(metric); p != "" {
			errs.add(path, "metric %q %s", k, p)
			continue
		}
		if prev, dup := where[metric]; dup {
			errs.add(path, "gives metric %s again (also as %s); give each metric once", metric, prev)
			continue
		}
		where[metric] = path
		if p := thresholdProblem(metric, x); p != "" {
			errs.add(path, "must %s", p)
			continue
		}
		out = append(out, ScaleStrategy{Metric: metric, Threshold: x})
	}

	// The current form: a list of {"metricName", "threshold"}.
	const path = "autoscaler.scaleStrategies"
	if in.list != nil && len(in.list) == 0 {
		errs.add(path, "must not be empty; give at least one strategy such as [%s], or remove scaleStrategies", strategyExample)
	}
	for i, raw := range in.list {
		st, ok := strategyElement(i, raw, errs)
		if !ok {
			continue
		}
		if prev, dup := where[st.Metric]; dup {
			if strings.HasPrefix(prev, "autoscaler.strategies.") {
				errs.add(path, "element %d scales on %s, which %s also sets; give each metric once, in scaleStrategies or in the older strategies, not both", i, st.Metric, prev)
			} else {
				errs.add(path, "element %d scales on %s again (first in %s); give each metric once", i, st.Metric, prev)
			}
			continue
		}
		where[st.Metric] = fmt.Sprintf("element %d", i)
		if p := thresholdProblem(st.Metric, st.Threshold); p != "" {
			errs.add(path, "element %d (%s): threshold must %s", i, st.Metric, p)
			continue
		}
		out = append(out, st)
	}

	slices.SortFunc(out, func(x, y ScaleStrategy) int { return strings.Compare(x.Metric, y.Metric) })
	a.Strategies = out
}

// strategyElement reads element i of autoscaler.scaleStrategies, reporting
// every problem of its keys; the threshold is checked by the caller.
func strategyElement(i int, raw json.RawMessage, errs *Errors) (ScaleStrategy, bool) {
	const path = "autoscaler.scaleStrategies"
	var st ScaleStrategy
	keys, vals := members(raw)
	got := map[string]bool{}
	suggested := map[string]bool{} // a typo of a key is not also reported missing
	ok := true
	for j, k := range keys {
		v := vals[j]
		if jsonKind(v) == "null" {
			continue // null means "not given", as elsewhere
		}
		if !slices.Contains(strategyKeys, k) {
			if s, near := closest(k, strategyKeys); near {
				errs.add(path, "element %d: unknown key %q; did you mean %s?", i, k, s)
				suggested[s] = true
			} else {
				errs.add(path, "element %d: unknown key %q; remove it or use metricName and threshold", i, k)
			}
			ok = false
			continue
		}
		if got[k] {
			errs.add(path, "element %d gives %s twice; keep one", i, k)
			ok = false
			continue
		}
		got[k] = true
		switch k {
		case "metricName":
			text, quoted, isText := scalarText(v)
			if !isText || !quoted {
				errs.add(path, `element %d: metricName must be a string, got %s; write "qps" or "cpu"`, i, show(v))
				ok = false
				continue
			}
			st.Metric = strings.ToLower(strings.TrimSpace(text))
			if p := metricProblem(st.Metric); p != "" {
				errs.add(path, "element %d: metricName %q %s", i, text, p)
				ok = false
			}
		case "threshold":
			text, _, isText := scalarText(v)
			x, isNum := parseFloat(text)
			if !isText || !isNum {
				errs.add(path, "element %d: threshold must be a number, got %s; e.g. 10 for qps or 80 (percent) for cpu", i, show(v))
				ok = false
				continue
			}
			st.Threshold = x
		}
	}
	for _, k := range strategyKeys {
		if !got[k] {
			ok = false
		}
		if !got[k] && !suggested[k] {
			errs.add(path, "element %d has no %s; write each strategy as %s", i, k, strategyExample)
		}
	}
	return st, ok
}
