// Package notproto is the one message for a body that is not the protobuf an
// EAS door expects. A body that looks like JSON gets a hint: users often post
// JSON tensors to a tensor service's EAS door, which takes the EAS protobuf,
// while the KServe v2 door of the same service takes JSON.
package notproto

import (
	"bytes"

	"github.com/eas-server/eas-server/internal/badinput"
)

// Error is a *badinput.Error saying body is not message (a protobuf
// message's full name), with the parse error and the fix.
func Error(body []byte, message string, err error) error {
	if b := bytes.TrimSpace(body); len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return badinput.Errorf("body is not a %s protobuf (%v); it looks like JSON: this door (POST /api/predict/<service>) takes the serialized %s message, while JSON tensors go to POST /v2/models/<service>/infer (KServe v2)", message, err, message)
	}
	return badinput.Errorf("body is not a %s protobuf (%v); send the serialized %s message", message, err, message)
}
