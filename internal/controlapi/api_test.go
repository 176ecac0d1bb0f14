package controlapi

import (
	"testing"

	"github.com/eas-server/eas-server/internal/service"
)

// TestNewVersionObject names a version's processor from its service.json:
// the code, "custom <type>" for a custom processor, "" for a config that
// does not parse.
func TestNewVersionObject(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"code", `{"name":"a","processor":"pmml"}`, "pmml"},
		{"custom", `{"name":"a","processor_type":"python"}`, "custom python"},
		{"hooks keep the code", `{"processor":"onnx_cpu","processor_type":"python"}`, "onnx_cpu"},
		{"not json", `{`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vo := NewVersionObject(service.VersionInfo{Version: 3, Current: true, Config: []byte(tc.config)})
			if vo.Processor != tc.want || vo.Version != 3 || !vo.Current || vo.ServiceConfig != tc.config {
				t.Errorf("%s: %+v, want processor %q", tc.config, vo, tc.want)
			}
		})
	}
}
