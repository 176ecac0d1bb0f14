package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder turns tokens back into pieces of text (tokenizers' decode_chain);
// the pieces joined are the text.
type decoder interface {
	decode(toks []string) []string
}

func joinStrings(s []string) string { return strings.Join(s, "") }

type decoderSeq []decoder

func (s decoderSeq) decode(toks []string) []string {
	for _, d := range s {
		toks = d.decode(toks)
	}
	return toks
}

// wordPieceDecoder drops the continuing prefix, puts a space before every
// other token but the first, and with cleanup undoes BERT's spacing of
// punctuation and contractions.
type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

var cleanupReplacer = []string{" .", ".", " ?", "?", " !", "!", " ,", ",", " ' ", "'", " n't", "n't", " 'm", "'m", " do not", " don't", " 's", "'s", " 've", "'ve", " 're", "'re"}

func (d wordPieceDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		if i != 0 {
			if s, ok := strings.CutPrefix(t, d.prefix); ok {
				t = s
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			// One replacement after the other, as tokenizers' cleanup.
			for k := 0; k < len(cleanupReplacer); k += 2 {
				t = strings.ReplaceAll(t, cleanupReplacer[k], cleanupReplacer[k+1])
			}
		}
		out[i] = t
	}
	return out
}

// byteLevelDecoder maps GPT-2's byte characters back to bytes (a token
// with any other character stays as it is) and reads the whole as UTF-8,
// invalid bytes becoming U+FFFD.
type byteLevelDecoder struct{}

func (byteLevelDecoder) decode(toks []string) []string {
	var b []byte
	for _, t := range toks {
		n := len(b)
		ok := true
		for _, r := range t {
			c, found := charBytes[r]
			if !found {
				ok = false
				break
			}
			b = append(b, c)
		}
		if !ok {
			b = append(b[:n], t...)
		}
	}
	return []string{strings.ToValidUTF8(lossy(b), "\uFFFD")}
}

// lossy is Rust's String::from_utf8_lossy: each maximal invalid sequence
// becomes one U+FFFD.
func lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			// Rust replaces the longest prefix of a valid sequence.
			n := invalidLen(b)
			sb.WriteRune(utf8.RuneError)
			b = b[n:]
			continue
		}
		sb.Write(b[:size])
		b = b[size:]
	}
	return sb.String()
}

// invalidLen is how many bytes from b[0] Rust's from_utf8_lossy takes as
// one invalid sequence: a lead byte and the continuation bytes that could
// still have made a valid character.
func invalidLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC || c == 0xEE || c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 && (x < lo || x > hi) || k > 0 && (x < 0x80 || x > 0xBF) {
			break
		}
		n++
	}
	return n
}

// metaspaceDecoder turns the replacement character back into spaces, but
// for the first token's when the pre-tokenizer prepends one.
type metaspaceDecoder struct {
	replacement rune
	scheme      int
}

func (d metaspaceDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		var sb strings.Builder
		for _, r := range t {
			if r == d.replacement {
				if i == 0 && d.scheme != prependNever {
					continue
				}
				sb.WriteByte(' ')
			} else {
				sb.WriteRune(r)
			}
		}
		out[i] = sb.String()
	}
	return out
}

// byteFallbackDecoder turns runs of <0xXX> tokens into their UTF-8 text,
// or one U+FFFD per byte when the run is not valid UTF-8.
type byteFallbackDecoder struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(t[3:5], 16, 8)
	return byte(v), err == nil
}

func (byteFallbackDecoder) decode(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDecoder struct{}

func (fuseDecoder) decode(toks []string) []string { return []string{strings.Join(toks, "")} }

// stripDecoder removes up to start leading and stop trailing content
// characters of each token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		a := 0
		for k := 0; k < d.start && k < len(rs); k++ {
			if rs[k] != d.content {
				break
			}
			a = k + 1
		}
		b := len(rs)
		for k := 0; k < d.stop && len(rs)-k-1 >= 0; k++ {
			idx := len(rs) - k - 1
			if rs[idx] != d.content {
				break
			}
			b = idx
		}
		if b < a {
			b = a
		}
		out[i] = string(rs[a:b])
	}
	return out
}

type replaceDecoder struct {
	p       pattern
	content string
}

func (d replaceDecoder) decode(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		var sb strings.Builder
		for _, m := range d.p.findMatches(t) {
			if m.match {
				sb.WriteString(d.content)
			} else if m.e <= len(t) {
				sb.WriteString(t[m.s:m.e])
			}
		}
		out[i] = sb.String()
	}
	return out
}

func parseDecoder(path string, raw json.RawMessage) (decoder, error) {
	o, t, err := typed(path, raw)
	if err != nil {
		return nil, err
	}
	var d decoder
	switch t {
	case "WordPiece":
		var w wordPieceDecoder
		if w.prefix, err = o.str("prefix", "##"); err != nil {
			return nil, err
		}
		if w.cleanup, err = o.boolean("cleanup", true); err != nil {
			return nil, err
		}
		d = w
	case "ByteLevel":
		o.ignore("add_prefix_space", "trim_offsets", "use_regex")
		d = byteLevelDecoder{}
	case "Metaspace":
		m, err := parseMetaspace(o)
		if err != nil {
			return nil, err
		}
		d = metaspaceDecoder{m.replacement, m.scheme}
	case "ByteFallback":
		d = byteFallbackDecoder{}
	case "Fuse":
		d = fuseDecoder{}
	case "Strip":
		c, err := o.str("content", " ")
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(c) != 1 {
			return nil, fmt.Errorf("%s: content %q is not one character", o.sub("content"), c)
		}
		s := stripDecoder{}
		s.content, _ = utf8.DecodeRuneInString(c)
		if s.start, err = o.integer("start", 0); err != nil {
			return nil, err
		}
		if s.stop, err = o.integer("stop", 0); err != nil {
			return nil, err
		}
		d = s
	case "Replace":
		p, err := parsePattern(o, "pattern")
		if err != nil {
			return nil, err
		}
		c, err := o.str("content", "")
		if err != nil {
			return nil, err
		}
		d = replaceDecoder{p, c}
	case "Sequence":
		var list []json.RawMessage
		if _, err := o.get("decoders", &list); err != nil {
			return nil, err
		}
		seq := decoderSeq{}
		for i, r := range list {
			x, err := parseDecoder(fmt.Sprintf("%s.decoders[%d]", path, i), r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		d = seq
	default:
		// BPEDecoder, CTC, ...
		return nil, unsupported(path, "decoder", t)
	}
	return d, o.done()
}

// DecodeStream decodes ids one at a time, for generation: each Step
// returns the text the new id adds, nothing while the text would end in
// half a character (U+FFFD), computed as tokenizers' DecodeStream does: the
// ids since a few tokens back are decoded again and what the earlier ones
// gave is cut off, so decoders that look at neighbours (spaces, prefixes)
// give the same text as decoding all at once.
type DecodeStream struct {
	t           *Tokenizer
	skipSpecial bool
	ids         []int32
	prefix      string
	prefixIndex int
}

// NewDecodeStream starts an incremental decoding.
func (t *Tokenizer) NewDecodeStream(skipSpecial bool) *DecodeStream {
	return &DecodeStream{t: t, skipSpecial: skipSpecial}
}

// Step adds one id and returns the new text ("" when there is none yet).
func (d *DecodeStream) Step(id int32) (string, error) {
	if d.prefix == "" && len(d.ids) > 0 {
		p, err := d.t.Decode(d.ids, d.skipSpecial)
		if err != nil {
			return "", err
		}
		if !strings.HasSuffix(p, "\uFFFD") {
			d.prefix, d.prefixIndex = p, len(d.ids)
		}
	}
	d.ids = append(d.ids, id)
	s, err := d.t.Decode(d.ids, d.skipSpecial)
	if err != nil {
		return "", err
	}
	if len(s) <= len(d.prefix) || strings.HasSuffix(s, "\uFFFD") {
		return "", nil
	}
	if !strings.HasPrefix(s, d.prefix) {
		return "", fmt.Errorf("decode stream: %q does not continue %q", s, d.prefix)
	}
	text := s[len(d.prefix):]
	newPrefixIndex := len(d.ids) - d.prefixIndex
	d.ids = append([]int32(nil), d.ids[d.prefixIndex:]...)
	if d.prefix, err = d.t.Decode(d.ids, d.skipSpecial); err != nil {
		return "", err
	}
	d.prefixIndex = newPrefixIndex
	return text, nil
}
