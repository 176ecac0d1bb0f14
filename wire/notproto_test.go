package wire_test

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/wire/caffepb"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/tfpb"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// Issue 34: JSON posted to a tensor service's EAS door got only "body is not
// a hie.processor.DataProto protobuf", without a word on where JSON goes.
func TestJSONOnAnEASDoorPointsToKServe(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"tfpb":    func(b []byte) error { _, err := tfpb.DecodeRequest(b); return err },
		"torchpb": func(b []byte) error { _, err := torchpb.DecodeRequest(b, nil); return err },
		"hiepb":   func(b []byte) error { _, err := hiepb.DecodeDataProto(b); return err },
		"caffepb": func(b []byte) error { _, err := caffepb.DecodeRequest(b, nil); return err },
	}
	for name, decode := range decoders {
		for _, body := range []string{`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`, ` [1, 2]`} {
			err := decode([]byte(body))
			if !badinput.Is(err) || !strings.Contains(err.Error(), "looks like JSON") || !strings.Contains(err.Error(), "/v2/models/<service>/infer") {
				t.Errorf("%s, JSON body %q: %v, want a 400 pointing to the KServe door", name, body, err)
			}
		}
		if err := decode([]byte("\xff\xff\xff")); err == nil || strings.Contains(err.Error(), "JSON") {
			t.Errorf("%s, bytes that are not JSON: %v, want no JSON hint", name, err)
		}
	}
}
