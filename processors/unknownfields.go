package processors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/badinput"
	"github.com/eas-server/eas-server/servicejson"
)

// UnknownFields is model_config "unknown_fields" of the processors that
// take EAS JSON records (pmml, the tree codes): what a request whose
// records carry keys that are not model features gets. A misspelled key
// ("temprature") is otherwise a missing value, and the model answers with
// confidence from a record it never saw.
type UnknownFields string

// The modes of UnknownFields.
const (
	UnknownIgnore UnknownFields = "ignore" // EAS's behaviour: the keys are dropped silently
	UnknownWarn   UnknownFields = "warn"   // the default: answered, with UnknownFieldsHeader and a metric
	UnknownReject UnknownFields = "reject" // 400, naming the keys and the nearest features
)

// UnknownFieldsHeader is the response header that names, under "warn",
// the record keys a request sent that the model does not read. The server
// counts the responses that carry it (eas_unknown_fields_total).
const UnknownFieldsHeader = "X-Eas-Unknown-Fields"

// maxUnknownHeader bounds the header's value: the names come from the
// caller, and a header is no place for thousands of them.
const maxUnknownHeader = 256

// ParseUnknownFields reads model_config "unknown_fields"; "" is warn.
func ParseUnknownFields(s string) (UnknownFields, error) {
	switch m := UnknownFields(s); m {
	case "":
		return UnknownWarn, nil
	case UnknownIgnore, UnknownWarn, UnknownReject:
		return m, nil
	}
	return "", fmt.Errorf(`model_config.unknown_fields: must be "ignore", "warn" or "reject", got %q`, s)
}

// maxUnknownKeys bounds the distinct unknown keys one request collects: a
// hostile body of a million distinct keys must not cost a million strings.
const maxUnknownKeys = 32

// UnknownKeys collects the distinct unknown keys of one request, in the
// order they first appear. A nil *UnknownKeys collects nothing (ignore).
type UnknownKeys struct {
	names []string
	more  bool // keys past maxUnknownKeys were dropped
}

// NewUnknownKeys returns a collector for mode, nil for ignore.
func NewUnknownKeys(mode UnknownFields) *UnknownKeys {
	if mode == UnknownIgnore {
		return nil
	}
	return &UnknownKeys{}
}

// Add notes one unknown key.
func (u *UnknownKeys) Add(key string) {
	if u == nil || slices.Contains(u.names, key) {
		return
	}
	if len(u.names) >= maxUnknownKeys {
		u.more = true
		return
	}
	u.names = append(u.names, key)
}

// AddBytes notes one unknown key given as bytes, allocating only for a key
// not seen before (a decoder meets the same key in every record).
func (u *UnknownKeys) AddBytes(key []byte) {
	if u == nil {
		return
	}
	for _, n := range u.names {
		if n == string(key) {
			return
		}
	}
	u.Add(string(key))
}

// Names are the keys collected.
func (u *UnknownKeys) Names() []string {
	if u == nil {
		return nil
	}
	return u.names
}

// Header is the UnknownFieldsHeader value: the keys comma-separated, cut
// at a name boundary to at most 256 bytes, with ",..." when cut. "" when
// there are none.
func (u *UnknownKeys) Header() string {
	if u == nil || len(u.names) == 0 {
		return ""
	}
	var b strings.Builder
	for i, n := range u.names {
		n = headerSafe(n)
		if b.Len()+len(n)+5 > maxUnknownHeader {
			b.WriteString(",...")
			return b.String()
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
	}
	if u.more {
		b.WriteString(",...")
	}
	return b.String()
}

// headerSafe keeps a caller's key to printable ASCII for a header value.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == ',' {
			return '?'
		}
		return r
	}, s)
}

// Reject is the 400 for mode reject: the unknown keys and, for each near
// a feature name, that name. nil when there are none.
func (u *UnknownKeys) Reject(features []string) error {
	if u == nil || len(u.names) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(features))
	parts := make([]string, 0, len(u.names))
	for _, n := range u.names {
		if s, ok := servicejson.Closest(n, sorted); ok {
			parts = append(parts, fmt.Sprintf("%q (did you mean %q?)", n, s))
		} else {
			parts = append(parts, fmt.Sprintf("%q", n))
		}
	}
	if u.more {
		parts = append(parts, "and more")
	}
	return badinput.Errorf("records carry keys that are not model features: %s; fix the keys, drop them, or set model_config.unknown_fields to \"warn\" or \"ignore\" (the features are listed by GET on the service)",
		strings.Join(parts, ", "))
}
