// Package unknownfields is model_config "unknown_fields", shared by the
// processors that read EAS JSON records (pmml, parameter_server, xgboost):
// the mode, and the collector of a request's record keys that are not model
// features, which answers "warn" with a header and "reject" with a 400 that
// suggests the nearest feature.
//
// It lives apart from package processors because it is one processor
// family's model_config, not part of the contract, and because its
// suggestions come from servicejson's edit distance: the contract, which
// outside Go code imports, stays free of the config parser. The header the
// server counts, processors.UnknownFieldsHeader, stays in the contract.
package unknownfields

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/servicejson"
)

// Mode is model_config "unknown_fields" of the processors that take EAS
// JSON records (pmml, the tree codes): what a request whose records carry
// keys that are not model features gets. A misspelled key ("temprature")
// is otherwise a missing value, and the model answers with confidence from
// a record it never saw.
type Mode string

// The modes.
const (
	Ignore Mode = "ignore" // EAS's behaviour: the keys are dropped silently
	Warn   Mode = "warn"   // the default: answered, with processors.UnknownFieldsHeader and a metric
	Reject Mode = "reject" // 400, naming the keys and the nearest features
)

// maxHeader bounds the header's value: the names come from the
// caller, and a header is no place for thousands of them.
const maxHeader = 256

// Parse reads model_config "unknown_fields"; "" is warn.
func Parse(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Warn, nil
	case Ignore, Warn, Reject:
		return m, nil
	}
	return "", fmt.Errorf(`model_config.unknown_fields: must be "ignore", "warn" or "reject", got %q`, s)
}

// maxKeys bounds the distinct unknown keys one request collects: a
// hostile body of a million distinct keys must not cost a million strings.
const maxKeys = 32

// Keys collects the distinct unknown keys of one request, in the
// order they first appear. A nil *Keys collects nothing (ignore).
type Keys struct {
	names []string
	more  bool // keys past maxKeys were dropped
}

// NewKeys returns a collector for mode, nil for ignore.
func NewKeys(mode Mode) *Keys {
	if mode == Ignore {
		return nil
	}
	return &Keys{}
}

// Add notes one unknown key.
func (u *Keys) Add(key string) {
	if u == nil || slices.Contains(u.names, key) {
		return
	}
	if len(u.names) >= maxKeys {
		u.more = true
		return
	}
	u.names = append(u.names, key)
}

// AddBytes notes one unknown key given as bytes, allocating only for a key
// not seen before (a decoder meets the same key in every record).
func (u *Keys) AddBytes(key []byte) {
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
func (u *Keys) Names() []string {
	if u == nil {
		return nil
	}
	return u.names
}

// Header is the processors.UnknownFieldsHeader value: the keys comma-separated, cut
// at a name boundary to at most 256 bytes, with ",..." when cut. "" when
// there are none.
func (u *Keys) Header() string {
	if u == nil || len(u.names) == 0 {
		return ""
	}
	var b strings.Builder
	for i, n := range u.names {
		n = headerSafe(n)
		if b.Len()+len(n)+5 > maxHeader {
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
func (u *Keys) Reject(features []string) error {
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
