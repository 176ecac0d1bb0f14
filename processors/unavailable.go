package processors

import "strings"

// unavailable explains, per EAS processor family, why this build does not
// serve a code and what to use instead. New returns the reason at deploy
// time, so an EAS service.json never deploys into a processor that silently
// does nothing.
var unavailable = []struct {
	prefix string
	reason string
}{
	{"caffe_", "Caffe models are not served here: convert the model to ONNX and use onnx_cpu (or onnx_cu100 with a GPU)"},
}

// unavailableReason returns the reason a known EAS code is not served.
func unavailableReason(code string) (string, bool) {
	for _, u := range unavailable {
		if strings.HasPrefix(code, u.prefix) {
			return u.reason, true
		}
	}
	return "", false
}
