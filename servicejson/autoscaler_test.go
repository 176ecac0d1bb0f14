package servicejson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// withAutoscaler is a valid service.json with the given autoscaler section
// (its JSON text) and metadata.instance 2.
func withAutoscaler(autoscaler string) string {
	return `{"name":"m","processor":"pmml","autoscaler":` + autoscaler + `,"metadata":{"instance":2}}`
}

// TestAutoscalerFormsAgree: the list form, the older map form, their
// dotted and string spellings and a mix of the two (one metric each) give
// the same typed Autoscaler, strategies sorted by metric.
func TestAutoscalerFormsAgree(t *testing.T) {
	up, down := time.Duration(0), 300*time.Second
	want := &Autoscaler{Min: 2, Max: 8, Strategies: []ScaleStrategy{{MetricCPU, 80}, {MetricQPS, 10.5}}}
	withWindows := *want
	withWindows.ScaleUpWindow, withWindows.ScaleDownWindow = &up, &down
	behavior := `"behavior":{"scaleUp":{"stabilizationWindowSeconds":0},"scaleDown":{"stabilizationWindowSeconds":300}}`
	for name, tc := range map[string]struct {
		doc  string
		want *Autoscaler
	}{
		"list": {withAutoscaler(`{"min":2,"max":8,"scaleStrategies":[{"metricName":"qps","threshold":10.5},{"metricName":"cpu","threshold":80}]}`), want},
		"map":  {withAutoscaler(`{"min":2,"max":8,"strategies":{"qps":10.5,"cpu":80}}`), want},
		"map as strings and dotted": {`{"name":"m","processor":"pmml","autoscaler.min":"2","autoscaler":{"max":8,"strategies.qps":"10.5"},
			"autoscaler.strategies.cpu":"80","metadata":{"instance":2}}`, want},
		"mixed":               {withAutoscaler(`{"min":2,"max":8,"strategies":{"cpu":80},"scaleStrategies":[{"metricName":"qps","threshold":"10.5"}]}`), want},
		"list, upper case":    {withAutoscaler(`{"min":2,"max":8,"scaleStrategies":[{"threshold":80,"metricName":" CPU"},{"metricName":"QPS","threshold":10.5}]}`), want},
		"list with behavior":  {withAutoscaler(`{"min":2,"max":8,"scaleStrategies":[{"metricName":"qps","threshold":10.5},{"metricName":"cpu","threshold":80}],` + behavior + `}`), &withWindows},
		"map, dotted windows": {`{"name":"m","processor":"pmml","autoscaler":{"min":2,"max":8,"strategies":{"qps":10.5,"cpu":80},"behavior.scaleUp.stabilizationWindowSeconds":"0"},"autoscaler.behavior.scaleDown":{"stabilizationWindowSeconds":300},"metadata":{"instance":2}}`, &withWindows},
		"null element keys":   {withAutoscaler(`{"min":2,"max":8,"scaleStrategies":[{"metricName":"qps","threshold":10.5,"x":null},{"metricName":"cpu","threshold":80}],"strategies":null}`), want},
		"no strategy":         {withAutoscaler(`{"min":2,"max":8}`), &Autoscaler{Min: 2, Max: 8}},
		"qps only":            {withAutoscaler(`{"min":1,"max":2,"strategies":{"qps":0.5}}`), &Autoscaler{Min: 1, Max: 2, Strategies: []ScaleStrategy{{MetricQPS, 0.5}}}},
		"qps at its limit":    {withAutoscaler(`{"min":1,"max":2,"strategies":{"qps":"1e6"}}`), &Autoscaler{Min: 1, Max: 2, Strategies: []ScaleStrategy{{MetricQPS, 1e6}}}},
		"cpu bounds":          {withAutoscaler(`{"min":2,"max":2,"scaleStrategies":[{"metricName":"cpu","threshold":100}]}`), &Autoscaler{Min: 2, Max: 2, Strategies: []ScaleStrategy{{MetricCPU, 100}}}},
	} {
		t.Run(name, func(t *testing.T) {
			s := mustParse(t, tc.doc)
			if !reflect.DeepEqual(s.Autoscaler, tc.want) {
				t.Errorf("autoscaler = %s, want %s", fmtAS(s.Autoscaler), fmtAS(tc.want))
			}
			if s.scale.byKey != nil || s.scale.list != nil {
				t.Errorf("Parse left its scratch input behind: %+v", s.scale)
			}
		})
	}
	s := mustParse(t, withAutoscaler(`{"min":2,"max":8,"strategies":{"qps":10}}`))
	if x, ok := s.Autoscaler.Strategy(MetricQPS); !ok || x != 10 {
		t.Errorf("Strategy(qps) = %v, %v", x, ok)
	}
	if _, ok := s.Autoscaler.Strategy(MetricCPU); ok {
		t.Error("Strategy(cpu) found a strategy that was not given")
	}
	if !s.IsSet("autoscaler.strategies") || s.IsSet("autoscaler.scaleStrategies") {
		t.Error("IsSet does not tell the two forms apart")
	}
}

func fmtAS(a *Autoscaler) string {
	if a == nil {
		return "nil"
	}
	w := func(d *time.Duration) string {
		if d == nil {
			return "unset"
		}
		return d.String()
	}
	var b strings.Builder
	for _, st := range a.Strategies {
		b.WriteString(st.Metric + "=" + num(st.Threshold) + " ")
	}
	return "{min " + num(float64(a.Min)) + " max " + num(float64(a.Max)) + " [" + b.String() + "] up " + w(a.ScaleUpWindow) + " down " + w(a.ScaleDownWindow) + "}"
}

// TestAutoscalerErrors: every problem of the autoscaler section is reported
// with its key, what is wrong and how to fix it, all at once.
func TestAutoscalerErrors(t *testing.T) {
	const ss = "autoscaler.scaleStrategies: "
	for name, tc := range map[string]struct {
		doc  string
		want []string // the problems, in order, each a prefix-free substring
	}{
		"min above max": {withAutoscaler(`{"min":5,"max":2,"strategies":{"qps":10}}`),
			[]string{"autoscaler.min: must not exceed autoscaler.max, got min 5 and max 2; swap them or raise max"}},
		"no max": {withAutoscaler(`{"min":1,"scaleStrategies":[{"metricName":"qps","threshold":10}]}`),
			[]string{`autoscaler: needs both min and max; write "autoscaler": {"min": 1, "max": 5, "scaleStrategies": [{"metricName": "qps", "threshold": 10}]}`}},
		"behavior only": {withAutoscaler(`{"behavior":{"scaleUp":{"stabilizationWindowSeconds":0}}}`),
			[]string{"autoscaler: needs both min and max"}},
		"instance below min": {`{"name":"m","processor":"pmml","autoscaler":{"min":2,"max":8,"strategies":{"qps":10}},"metadata":{"instance":1}}`,
			[]string{"metadata.instance: is 1, outside autoscaler.min 2 .. autoscaler.max 8; the autoscaler starts from metadata.instance, so set it between 2 and 8 or widen autoscaler.min/max"}},
		"instance above max": {`{"name":"m","processor":"pmml","autoscaler":{"min":1,"max":3,"strategies":{"qps":10}},"metadata":{"instance":4}}`,
			[]string{"metadata.instance: is 4, outside autoscaler.min 1 .. autoscaler.max 3"}},
		"map: unsupported metric": {withAutoscaler(`{"min":1,"max":3,"strategies":{"gpu":70,"rt":100}}`),
			[]string{`autoscaler.strategies.gpu: metric "gpu" is not supported: this server scales on qps and cpu only; remove it, or scale on qps (requests per second per instance) or cpu (percent of the requested CPU)`,
				`autoscaler.strategies.rt: metric "rt" is not supported: this server scales on qps and cpu only`}},
		"map: qps zero": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":0}}`),
			[]string{"autoscaler.strategies.qps: must be greater than 0 and at most 1000000, got 0; the qps threshold is the requests per second each instance should take, e.g. 10"}},
		"map: qps negative": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":-1}}`),
			[]string{"autoscaler.strategies.qps: must be greater than 0 and at most 1000000, got -1"}},
		"map: qps too high": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":1e300}}`),
			[]string{"autoscaler.strategies.qps: must be greater than 0 and at most 1000000, got 1e+300"}},
		"map: cpu above 100": {withAutoscaler(`{"min":1,"max":3,"strategies":{"cpu":150}}`),
			[]string{"autoscaler.strategies.cpu: must be a whole percent between 1 and 100, got 150; the cpu threshold is the average CPU use in percent of the requested CPU, e.g. 80"}},
		"map: cpu fraction": {withAutoscaler(`{"min":1,"max":3,"strategies":{"cpu":0.8}}`),
			[]string{"autoscaler.strategies.cpu: must be a whole percent between 1 and 100, got 0.8"}},
		"map: not a number": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":"lots"}}`),
			[]string{`autoscaler.strategies.qps: must be a number, got "lots"; give thresholds by metric such as {"qps": 10, "cpu": 80} (or a list in autoscaler.scaleStrategies)`}},
		"map: a list": {withAutoscaler(`{"min":1,"max":3,"strategies":[{"metricName":"qps","threshold":10}]}`),
			[]string{"autoscaler.strategies: must be an object, got a list; give thresholds by metric such as"}},
		"map: one metric in two cases": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10,"QPS":10}}`),
			[]string{"autoscaler.strategies.qps: gives metric qps again (also as autoscaler.strategies.QPS); give each metric once"}},
		"list: empty": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[]}`),
			[]string{ss + `must not be empty; give at least one strategy such as [{"metricName": "qps", "threshold": 10}], or remove scaleStrategies`}},
		"list: an object": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":{"qps":10}}`),
			[]string{ss + `must be a JSON list, got an object; give a list such as [{"metricName": "qps", "threshold": 10}, {"metricName": "cpu", "threshold": 80}]`}},
		"list: not objects": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":["qps"]}`),
			[]string{ss + `element 0 must be a JSON object, got "qps"; give a list such as`}},
		"list: too long": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[` + strings.Repeat(`{},`, 16) + `{}]}`),
			[]string{ss + "must have at most 16 elements, got 17"}},
		"list: unsupported metrics": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"gpu","threshold":70},{"metricName":"rt","threshold":100}]}`),
			[]string{ss + `element 0: metricName "gpu" is not supported: this server scales on qps and cpu only; remove it, or scale on qps`,
				ss + `element 1: metricName "rt" is not supported: this server scales on qps and cpu only`}},
		"list: empty metric": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"","threshold":70}]}`),
			[]string{ss + `element 0: metricName "" is empty; name qps or cpu`}},
		"list: metric not a string": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":1,"threshold":70}]}`),
			[]string{ss + `element 0: metricName must be a string, got 1; write "qps" or "cpu"`}},
		"list: threshold not a number": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":true}]}`),
			[]string{ss + "element 0: threshold must be a number, got true; e.g. 10 for qps or 80 (percent) for cpu"}},
		"list: thresholds out of range": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":0},{"metricName":"cpu","threshold":101}]}`),
			[]string{ss + "element 0 (qps): threshold must be greater than 0 and at most 1000000, got 0; the qps threshold is the requests per second each instance should take, e.g. 10",
				ss + "element 1 (cpu): threshold must be a whole percent between 1 and 100, got 101; the cpu threshold is the average CPU use in percent of the requested CPU"}},
		"list: missing keys": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps"},{"threshold":10},{}]}`),
			[]string{ss + `element 0 has no threshold; write each strategy as {"metricName": "qps", "threshold": 10}`,
				ss + "element 1 has no metricName; write each strategy as",
				ss + "element 2 has no metricName", ss + "element 2 has no threshold"}},
		"list: typo of a key": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricname":"qps","threshold":10}]}`),
			[]string{ss + `element 0: unknown key "metricname"; did you mean metricName?`}},
		"list: unknown key": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":10,"service":"x"}]}`),
			[]string{ss + `element 0: unknown key "service"; remove it or use metricName and threshold`}},
		"list: key twice": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":10,"threshold":20}]}`),
			[]string{ss + "element 0 gives threshold twice; keep one"}},
		"list: metric twice": {withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":10},{"metricName":"cpu","threshold":80},{"metricName":"qps","threshold":20}]}`),
			[]string{ss + "element 2 scales on qps again (first in element 0); give each metric once"}},
		"metric in both forms": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"scaleStrategies":[{"metricName":"qps","threshold":10}]}`),
			[]string{ss + "element 0 scales on qps, which autoscaler.strategies.qps also sets; give each metric once, in scaleStrategies or in the older strategies, not both"}},
		"window too long": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"behavior":{"scaleDown":{"stabilizationWindowSeconds":3601}}}`),
			[]string{"autoscaler.behavior.scaleDown.stabilizationWindowSeconds: must be between 0 and 3600 s, got 3601; seconds the autoscaler looks back before it scales down, e.g. 300"}},
		"window negative": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"behavior":{"scaleUp":{"stabilizationWindowSeconds":-1}}}`),
			[]string{"autoscaler.behavior.scaleUp.stabilizationWindowSeconds: must be between 0 and 3600 s, got -1; seconds the autoscaler looks back before it scales up, e.g. 0"}},
		"window fraction": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"behavior":{"scaleUp":{"stabilizationWindowSeconds":1.5}}}`),
			[]string{"autoscaler.behavior.scaleUp.stabilizationWindowSeconds: must be a whole number (s), got 1.5"}},
		"behavior typo": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"behavior":{"scaleDown":{"stabilizationWindow":300}}}`),
			[]string{"autoscaler.behavior.scaleDown.stabilizationWindow: unknown key; did you mean autoscaler.behavior.scaleDown.stabilizationWindowSeconds?"}},
		"behavior unknown section": {withAutoscaler(`{"min":1,"max":3,"strategies":{"qps":10},"behavior":{"onZero":{"scaleDownGracePeriodSeconds":300}}}`),
			[]string{"autoscaler.behavior.onZero: is EAS's scale to zero, which this server does not support (autoscaler.min is at least 1); remove it"}},
		"section typo": {withAutoscaler(`{"min":1,"max":3,"scale_strategies":[{"metricName":"qps","threshold":10}]}`),
			[]string{"autoscaler.scale_strategies: unknown key; did you mean autoscaler.scaleStrategies?"}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse accepted %s: %+v", tc.doc, s.Autoscaler)
			}
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T", err)
			}
			if len(errs.Problems) != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(errs.Problems), len(tc.want), err)
			}
			for i, w := range tc.want {
				if i < len(errs.Problems) && !strings.HasPrefix(errs.Problems[i].Error(), w) {
					t.Errorf("problem %d = %q\nwant prefix  %q", i, errs.Problems[i].Error(), w)
				}
			}
		})
	}
}

// TestAutoscalerWarning: serve warns that it does not autoscale, and says
// where the section does take effect.
func TestAutoscalerWarning(t *testing.T) {
	s := mustParse(t, withAutoscaler(`{"min":1,"max":3,"scaleStrategies":[{"metricName":"qps","threshold":10}]}`))
	w := s.Warnings()
	if len(w) != 1 || w[0].Path != "autoscaler" {
		t.Fatalf("warnings = %v", w)
	}
	for _, want := range []string{"accepted for EAS compatibility; this server does not autoscale", "metadata.instance", "Kubernetes", "eas-server controller", "HorizontalPodAutoscaler"} {
		if !strings.Contains(w[0].Msg, want) {
			t.Errorf("warning %q lacks %q", w[0].Msg, want)
		}
	}
}
