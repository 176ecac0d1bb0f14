package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// jobj reads one JSON object of a tokenizer.json, remembering its path and
// which keys were read: done refuses every key left unread, so that no
// setting is ever silently ignored.
type jobj struct {
	path string
	m    map[string]json.RawMessage
	used map[string]bool
}

func newJobj(path string, raw json.RawMessage) (*jobj, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: not an object", path)
	}
	return &jobj{path: path, m: m, used: map[string]bool{}}, nil
}

func (o *jobj) sub(key string) string { return o.path + "." + key }

func (o *jobj) raw(key string) (json.RawMessage, bool) {
	o.used[key] = true
	r, ok := o.m[key]
	if !ok || string(r) == "null" {
		return nil, false
	}
	return r, true
}

func (o *jobj) get(key string, dst any) (bool, error) {
	r, ok := o.raw(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(r, dst); err != nil {
		return false, fmt.Errorf("%s: %v", o.sub(key), err)
	}
	return true, nil
}

func (o *jobj) str(key, def string) (string, error) {
	s := def
	_, err := o.get(key, &s)
	return s, err
}

func (o *jobj) boolean(key string, def bool) (bool, error) {
	b := def
	_, err := o.get(key, &b)
	return b, err
}

func (o *jobj) integer(key string, def int) (int, error) {
	v := def
	_, err := o.get(key, &v)
	return v, err
}

// ignore marks keys that carry nothing for encoding or decoding.
func (o *jobj) ignore(keys ...string) {
	for _, k := range keys {
		o.used[k] = true
	}
}

func (o *jobj) done() error {
	var left []string
	for k := range o.m {
		if !o.used[k] {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	return fmt.Errorf("%s: unsupported setting %q", o.path, left[0])
}

// typed reads an object's "type" (tokenizer.json's tag of every component).
func typed(path string, raw json.RawMessage) (*jobj, string, error) {
	o, err := newJobj(path, raw)
	if err != nil {
		return nil, "", err
	}
	t, err := o.str("type", "")
	if err != nil {
		return nil, "", err
	}
	if t == "" {
		return nil, "", fmt.Errorf("%s: no type", path)
	}
	return o, t, nil
}

func unsupported(path, kind, t string) error {
	return fmt.Errorf("%s: %s type %q is not supported", path, kind, t)
}

// normalizer changes a piece of text before it is split, keeping its
// alignment with the original.
type normalizer interface {
	normalize(n *normString)
}

type normalizerSeq []normalizer

func (s normalizerSeq) normalize(n *normString) {
	for _, x := range s {
		x.normalize(n)
	}
}

// bertNormalizer is tokenizers' BertNormalizer, on BERT's character classes
// (isControl, isWhitespace, isCJK of bert.go, shared with Bert).
type bertNormalizer struct {
	clean, chinese, stripAccents, lower bool
}

func (b bertNormalizer) normalize(n *normString) {
	if b.clean {
		n.filter(func(r rune) bool { return !(r == 0 || r == 0xfffd || isControl(r)) })
		n.mapRunes(func(r rune) rune {
			if isWhitespace(r) {
				return ' '
			}
			return r
		})
	}
	if b.chinese {
		var edits []edit
		for i, r := range n.norm {
			if r >= 0x3400 && isCJK(r) {
				edits = append(edits, edit{i, i + utf8.RuneLen(r), []change{{' ', 0}, {r, 1}, {' ', 1}}})
			}
		}
		n.applyEdits(edits)
	}
	if b.stripAccents {
		unicodeNormalize(n, norm.NFD)
		n.filter(func(r rune) bool { return !isMn(r) })
	}
	if b.lower {
		lowercase(n)
	}
}

// lowercase is Rust's char::to_lowercase of each character: the simple
// mapping but İ, which becomes i and a combining dot.
func lowercase(n *normString) {
	if !strings.ContainsRune(n.norm, 'İ') {
		n.mapRunes(unicode.ToLower)
		return
	}
	cs := make([]change, 0, len(n.norm)+4)
	for _, r := range n.norm {
		if r == 'İ' {
			cs = append(cs, change{'i', 0}, change{'\u0307', 1})
		} else {
			cs = append(cs, change{unicode.ToLower(r), 0})
		}
	}
	n.transform(cs, 0)
}

type unicodeNormalizer struct{ f norm.Form }

func (u unicodeNormalizer) normalize(n *normString) { unicodeNormalize(n, u.f) }

// unicodeNormalize applies a normalization form, segment by segment, with
// the alignment tokenizers' unicode-normalization-alignments gives: in a
// decomposition, each character's first part replaces it and the rest are
// insertions; in a composition, the composed character replaces the first
// of the characters it absorbs and removes the others.
func unicodeNormalize(n *normString, f norm.Form) {
	if f.IsNormalString(n.norm) {
		return
	}
	// Only the chunks that change are rewritten (rewriting a chunk as it
	// is would keep its alignment anyway).
	var edits []edit
	var buf []byte
	for start := 0; start < len(n.norm); {
		// QuickSpan's end is a boundary: what comes before is normal and
		// does not combine with what follows.
		start += f.QuickSpanString(n.norm[start:])
		if start >= len(n.norm) {
			break
		}
		k := f.NextBoundaryInString(n.norm[start:], true)
		if k <= 0 {
			k = len(n.norm) - start
		}
		in := n.norm[start : start+k]
		buf = f.AppendString(buf[:0], in)
		if string(buf) != in {
			edits = append(edits, edit{start, start + k, normChanges(in, string(buf), f)})
		}
		start += k
	}
	n.applyEdits(edits)
}

// normChanges are the changes that turn a chunk into its normal form.
func normChanges(in, out string, f norm.Form) []change {
	var per []change
	var sb strings.Builder
	for _, r := range in {
		d := f.String(string(r))
		sb.WriteString(d)
		k := 0
		for _, x := range d {
			per = append(per, change{x, min(k, 1)})
			k++
		}
	}
	if sb.String() == out && utf8.RuneCountInString(in) <= len(per) {
		return per
	}
	k := utf8.RuneCountInString(in)
	outR := []rune(out)
	m := len(outR)
	cs := make([]change, 0, m)
	for j, r := range outR {
		switch {
		case m >= k && j < k:
			cs = append(cs, change{r, 0})
		case m >= k:
			cs = append(cs, change{r, 1})
		case j < m-1:
			cs = append(cs, change{r, 0})
		default:
			cs = append(cs, change{r, -(k - m)})
		}
	}
	return cs
}

type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(n *normString) { lowercase(n) }

type stripNormalizer struct{ left, right bool }

func (s stripNormalizer) normalize(n *normString) { n.lrstrip(s.left, s.right) }

type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(n *normString) {
	n.filter(func(r rune) bool { return !unicode.Is(unicode.M, r) })
}

type replaceNormalizer struct {
	p       pattern
	content string
}

func (r replaceNormalizer) normalize(n *normString) { n.replace(r.p, r.content) }

type prependNormalizer struct{ s string }

func (p prependNormalizer) normalize(n *normString) { n.prepend(p.s) }

func parseNormalizer(path string, raw json.RawMessage) (normalizer, error) {
	o, t, err := typed(path, raw)
	if err != nil {
		return nil, err
	}
	var nz normalizer
	switch t {
	case "BertNormalizer":
		var b bertNormalizer
		if b.clean, err = o.boolean("clean_text", true); err != nil {
			return nil, err
		}
		if b.chinese, err = o.boolean("handle_chinese_chars", true); err != nil {
			return nil, err
		}
		if b.lower, err = o.boolean("lowercase", true); err != nil {
			return nil, err
		}
		if b.stripAccents, err = o.boolean("strip_accents", b.lower); err != nil {
			return nil, err
		}
		nz = b
	case "NFC":
		nz = unicodeNormalizer{norm.NFC}
	case "NFD":
		nz = unicodeNormalizer{norm.NFD}
	case "NFKC":
		nz = unicodeNormalizer{norm.NFKC}
	case "NFKD":
		nz = unicodeNormalizer{norm.NFKD}
	case "Lowercase":
		nz = lowercaseNormalizer{}
	case "Strip":
		var s stripNormalizer
		if s.left, err = o.boolean("strip_left", true); err != nil {
			return nil, err
		}
		if s.right, err = o.boolean("strip_right", true); err != nil {
			return nil, err
		}
		nz = s
	case "StripAccents":
		nz = stripAccentsNormalizer{}
	case "Replace":
		p, err := parsePattern(o, "pattern")
		if err != nil {
			return nil, err
		}
		c, err := o.str("content", "")
		if err != nil {
			return nil, err
		}
		nz = replaceNormalizer{p, c}
	case "Prepend":
		s, err := o.str("prepend", "")
		if err != nil {
			return nil, err
		}
		nz = prependNormalizer{s}
	case "Sequence":
		var list []json.RawMessage
		if _, err := o.get("normalizers", &list); err != nil {
			return nil, err
		}
		seq := normalizerSeq{}
		for i, r := range list {
			x, err := parseNormalizer(fmt.Sprintf("%s.normalizers[%d]", path, i), r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		nz = seq
	default:
		// Precompiled (sentencepiece's charsmap), ByteLevel, ...: none of
		// the tokenizers this package is checked on needs them.
		return nil, unsupported(path, "normalizer", t)
	}
	return nz, o.done()
}

// parsePattern reads {"String": s} or {"Regex": r}.
func parsePattern(o *jobj, key string) (pattern, error) {
	r, ok := o.raw(key)
	if !ok {
		return nil, fmt.Errorf("%s: missing", o.sub(key))
	}
	var p struct {
		String *string
		Regex  *string
	}
	if err := json.Unmarshal(r, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", o.sub(key), err)
	}
	switch {
	case p.String != nil:
		return stringPattern(*p.String), nil
	case p.Regex != nil:
		re, err := compileRegex(*p.Regex)
		if err != nil {
			return nil, fmt.Errorf("%s.Regex: %v", o.sub(key), err)
		}
		return re, nil
	}
	return nil, fmt.Errorf("%s: neither String nor Regex", o.sub(key))
}
