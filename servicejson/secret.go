package servicejson

import (
	"encoding/json"
	"log/slog"
)

// Secret holds a credential such as a service token. It is a struct rather
// than a string type so that the value cannot leak by a plain conversion:
// printing it (%v, %s, %#v), logging it with slog or marshalling it to JSON
// all show "[redacted]". Reveal returns the value for the one place that
// needs it: token verification. The zero value is the empty secret.
type Secret struct {
	v string
}

// Redacted is what a Secret prints instead of its value.
const Redacted = "[redacted]"

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the secret value.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty (no token was given).
func (s Secret) IsZero() bool { return s.v == "" }

// String returns "[redacted]" (or "" for an empty secret, so that an unset
// token reads as unset).
func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return Redacted
}

// GoString redacts the value under %#v.
func (s Secret) GoString() string { return "servicejson.Secret(" + s.String() + ")" }

// LogValue keeps the secret out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes the redacted form: a Service marshalled for an API
// answer or a log must not carry the token. Persist Service.Raw instead.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

var _ slog.LogValuer = Secret{}
