package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is one split of the text: a normalized piece and, once the model
// (or the added vocabulary) has run on it, its tokens.
type piece struct {
	n      normString
	added  int32 // the added token's id when hasTok
	hasTok bool
}

// token is a model's token, its offsets in bytes of its piece's norm.
type token struct {
	id    int32
	value string
	s, e  int
}

// preTokenized is tokenizers' PreTokenizedString: the pieces of one text.
type preTokenized struct {
	pieces []piece
}

// splitEach replaces every piece without tokens by the pieces f makes of
// it, dropping empty ones.
func (p *preTokenized) splitEach(f func(n normString, out []normString) []normString) {
	size := 0
	for _, pc := range p.pieces {
		size += len(pc.n.norm)
	}
	out := make([]piece, 0, len(p.pieces)+size/4+1)
	var buf []normString
	for _, pc := range p.pieces {
		if pc.hasTok {
			out = append(out, pc)
			continue
		}
		buf = f(pc.n, buf[:0])
		for _, n := range buf {
			if n.norm != "" {
				out = append(out, piece{n: n})
			}
		}
	}
	p.pieces = out
}

func (p *preTokenized) normalizeEach(f func(n *normString)) {
	for i := range p.pieces {
		if !p.pieces[i].hasTok {
			f(&p.pieces[i].n)
		}
	}
}

type preTokenizer interface {
	preTokenize(p *preTokenized)
}

type preTokenizerSeq []preTokenizer

func (s preTokenizerSeq) preTokenize(p *preTokenized) {
	for _, x := range s {
		x.preTokenize(p)
	}
}

// isSpace is Unicode's White_Space (Rust's char::is_whitespace).
func isSpace(r rune) bool { return unicode.IsSpace(r) }

// splitPre splits every piece where pat matches.
type splitPre struct {
	p        pattern
	behavior int
}

func (s splitPre) preTokenize(p *preTokenized) {
	p.splitEach(func(n normString, out []normString) []normString { return n.splitBy(s.p, s.behavior, out) })
}

// bertPre is BertPreTokenizer: whitespace removed, punctuation (BERT's,
// isPunct of bert.go) isolated.
type bertPre struct{}

func (bertPre) preTokenize(p *preTokenized) {
	splitPre{runePattern(isSpace), splitRemoved}.preTokenize(p)
	splitPre{runePattern(isPunct), splitIsolated}.preTokenize(p)
}

// byteLevelPre is the ByteLevel pre-tokenizer: an optional space before
// the text, GPT-2's split, then every byte written as GPT-2's printable
// character for it.
type byteLevelPre struct {
	addPrefixSpace, trimOffsets, useRegex bool
}

func (b byteLevelPre) preTokenize(p *preTokenized) {
	p.splitEach(func(n normString, out []normString) []normString {
		if b.addPrefixSpace && !strings.HasPrefix(n.norm, " ") {
			n.prepend(" ")
		}
		if b.useRegex {
			return n.splitBy(gpt2Pattern, splitIsolated, out)
		}
		return append(out, n)
	})
	p.normalizeEach(byteLevelTransform)
}

// bytesChar is GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for
// themselves, the others for 256 and up in order.
var bytesChar, charBytes = func() ([256]rune, map[rune]byte) {
	var t [256]rune
	m := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
		m[t[b]] = byte(b)
	}
	return t, m
}()

// byteLevelTransform writes each byte as its character: the first byte of
// a character takes its alignment, the others (insertions) the alignment
// of the character's last byte, as tokenizers' transform does.
func byteLevelTransform(n *normString) {
	s := n.norm
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	al := make([]span, 0, len(s)*2)
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		first, last := n.rawAt(i), n.rawAt(i+size-1)
		for k := 0; k < size; k++ {
			c := bytesChar[s[i+k]]
			a := first
			if k > 0 {
				a = last
			}
			sb.WriteRune(c)
			al = append(al, a)
			if c >= 0x80 {
				al = append(al, a)
			}
		}
		i += size
	}
	if n.align == nil {
		// rawAt already added sub; the new array is in the same coordinates.
	}
	n.norm = sb.String()
	n.align = al
}

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	replacement rune
	scheme      int
	split       bool
}

func (m metaspacePre) preTokenize(p *preTokenized) {
	rep := string(m.replacement)
	p.splitEach(func(n normString, out []normString) []normString {
		n.replace(runePattern(func(r rune) bool { return r == ' ' }), rep)
		switch m.scheme {
		case prependAlways:
			if !strings.HasPrefix(n.norm, rep) {
				n.prepend(rep)
			}
		case prependFirst:
			if !strings.HasPrefix(n.norm, rep) && n.shift == 0 {
				n.prepend(rep)
			}
		}
		if m.split {
			return n.splitBy(runePattern(func(r rune) bool { return r == m.replacement }), splitMergedWithNext, out)
		}
		return append(out, n)
	})
}

// isWord is the regex crate's Unicode \w.
func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
	}
	return unicode.In(r, unicode.L, unicode.Nl, unicode.M, unicode.Nd, unicode.Pc) || r == 0x200C || r == 0x200D || unicode.Is(unicode.Other_Alphabetic, r)
}

// whitespacePattern is the Whitespace pre-tokenizer's `\w+|[^\w\s]+`.
type whitespacePattern struct{}

func (whitespacePattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	prev := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if isSpace(r) {
			i += size
			continue
		}
		w := isWord(r)
		j := i + size
		for j < len(s) {
			r2, sz := utf8.DecodeRuneInString(s[j:])
			if isSpace(r2) || isWord(r2) != w {
				break
			}
			j += sz
		}
		if prev != i {
			out = append(out, match{prev, i, false})
		}
		out = append(out, match{i, j, true})
		prev = j
		i = j
	}
	if prev != len(s) {
		out = append(out, match{prev, len(s), false})
	}
	return out
}

func parseBehavior(o *jobj, key string, def int) (int, error) {
	s, err := o.str(key, "")
	if err != nil {
		return 0, err
	}
	switch s {
	case "":
		return def, nil
	case "Removed":
		return splitRemoved, nil
	case "Isolated":
		return splitIsolated, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, fmt.Errorf("%s: unknown behavior %q", o.sub(key), s)
}

func parsePreTokenizer(path string, raw json.RawMessage) (preTokenizer, error) {
	o, t, err := typed(path, raw)
	if err != nil {
		return nil, err
	}
	var pt preTokenizer
	switch t {
	case "BertPreTokenizer":
		pt = bertPre{}
	case "ByteLevel":
		var b byteLevelPre
		if b.addPrefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		if b.trimOffsets, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		if b.useRegex, err = o.boolean("use_regex", true); err != nil {
			return nil, err
		}
		pt = b
	case "Metaspace":
		m, err := parseMetaspace(o)
		if err != nil {
			return nil, err
		}
		pt = m
	case "Whitespace":
		pt = splitPre{invertPattern{whitespacePattern{}}, splitRemoved}
	case "WhitespaceSplit":
		pt = splitPre{runePattern(isSpace), splitRemoved}
	case "Punctuation":
		b, err := parseBehavior(o, "behavior", splitIsolated)
		if err != nil {
			return nil, err
		}
		pt = splitPre{runePattern(isPunct), b}
	case "Split":
		p, err := parsePattern(o, "pattern")
		if err != nil {
			return nil, err
		}
		b, err := parseBehavior(o, "behavior", -1)
		if err != nil {
			return nil, err
		}
		if b < 0 {
			return nil, fmt.Errorf("%s: missing behavior", path)
		}
		inv, err := o.boolean("invert", false)
		if err != nil {
			return nil, err
		}
		if inv {
			p = invertPattern{p}
		}
		pt = splitPre{p, b}
	case "Digits":
		ind, err := o.boolean("individual_digits", false)
		if err != nil {
			return nil, err
		}
		b := splitContiguous
		if ind {
			b = splitIsolated
		}
		pt = splitPre{runePattern(unicode.IsNumber), b}
	case "Sequence":
		var list []json.RawMessage
		if _, err := o.get("pretokenizers", &list); err != nil {
			return nil, err
		}
		seq := preTokenizerSeq{}
		for i, r := range list {
			x, err := parsePreTokenizer(fmt.Sprintf("%s.pretokenizers[%d]", path, i), r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		pt = seq
	default:
		// CharDelimiterSplit, UnicodeScripts, FixedLength, ...
		return nil, unsupported(path, "pre-tokenizer", t)
	}
	return pt, o.done()
}

func parseMetaspace(o *jobj) (metaspacePre, error) {
	m := metaspacePre{replacement: '▁', scheme: prependAlways, split: true}
	rep, err := o.str("replacement", "▁")
	if err != nil {
		return m, err
	}
	if utf8.RuneCountInString(rep) != 1 {
		return m, fmt.Errorf("%s: replacement %q is not one character", o.sub("replacement"), rep)
	}
	m.replacement, _ = utf8.DecodeRuneInString(rep)
	o.ignore("str_rep")
	aps, err := o.boolean("add_prefix_space", true)
	if err != nil {
		return m, err
	}
	if !aps {
		m.scheme = prependNever
	}
	scheme, err := o.str("prepend_scheme", "")
	if err != nil {
		return m, err
	}
	switch scheme {
	case "":
	case "always":
		m.scheme = prependAlways
	case "first":
		m.scheme = prependFirst
	case "never":
		m.scheme = prependNever
	default:
		return m, fmt.Errorf("%s: unknown prepend_scheme %q", o.sub("prepend_scheme"), scheme)
	}
	if m.split, err = o.boolean("split", true); err != nil {
		return m, err
	}
	return m, nil
}

// The pre-tokenizer patterns of GPT-2 (the ByteLevel pre-tokenizer's),
// llama3 and qwen2/qwen3. They hold a lookahead, `\s+(?!\S)`, which Go's
// regexp (RE2) has not; a backtracking engine (dlclark/regexp2) would have
// it, but is several times slower and exponential on hostile patterns. So
// these three, the ones real tokenizer.json files carry, run as the
// hand-written scanner gptScanner, which gives the same matches; any other
// regex goes to Go's regexp with \s, \d, \w made Unicode as Oniguruma's
// are, and a lookaround there is refused at load.
const (
	gpt2Regex   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwenRegex   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

var gpt2Pattern = gptScanner{maxDigits: 0, llama: false}

// gptScanner matches the three patterns above: llama selects llama3's
// alternatives (case-insensitive contractions, one leading non-letter
// before letters, [\r\n]* after punctuation, \s*[\r\n]+), maxDigits the
// digits' repetition (0: any number, after an optional space as GPT-2's).
// Every character starts a match of these patterns, so the matches tile
// the text.
type gptScanner struct {
	maxDigits int
	llama     bool
}

func (g gptScanner) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	out := make([]match, 0, len(s)/4+1)
	for i := 0; i < len(s); {
		e := g.matchAt(s, i)
		out = append(out, match{i, e, true})
		i = e
	}
	return out
}

func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

func isS(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}

func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

func (g gptScanner) run(s string, i int, pred func(rune) bool, max int) int {
	n := 0
	for i < len(s) && (max <= 0 || n < max) {
		r, size := runeAt(s, i)
		if !pred(r) {
			break
		}
		i += size
		n++
	}
	return i
}

func foldEq(r rune, c byte, fold bool) bool {
	if rune(c) == r {
		return true
	}
	if !fold {
		return false
	}
	if r == rune(c-'a'+'A') {
		return true
	}
	return c == 's' && r == 'ſ'
}

func (g gptScanner) contraction(s string, i int) int {
	if s[i] != '\'' {
		return -1
	}
	for _, suf := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
		j := i + 1
		ok := true
		for k := 0; k < len(suf); k++ {
			r, size := runeAt(s, j)
			if r < 0 || !foldEq(r, suf[k], g.llama) {
				ok = false
				break
			}
			j += size
		}
		if ok {
			return j
		}
	}
	return -1
}

// matchAt is the end of the match that starts at i.
func (g gptScanner) matchAt(s string, i int) int {
	if e := g.contraction(s, i); e >= 0 {
		return e
	}
	r, size := runeAt(s, i)
	next, nsize := runeAt(s, i+size)
	if g.llama {
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if isL(r) {
			return g.run(s, i, isL, 0)
		}
		if r != '\r' && r != '\n' && !isN(r) && next >= 0 && isL(next) {
			return g.run(s, i+size, isL, 0)
		}
		// \p{N}{1,max}
		if isN(r) {
			return g.run(s, i, isN, g.maxDigits)
		}
	} else {
		// ` ?\p{L}+`, ` ?\p{N}+`
		if isL(r) {
			return g.run(s, i, isL, 0)
		}
		if r == ' ' && next >= 0 && isL(next) {
			return g.run(s, i+1, isL, 0)
		}
		if isN(r) {
			return g.run(s, i, isN, 0)
		}
		if r == ' ' && next >= 0 && isN(next) {
			return g.run(s, i+1, isN, 0)
		}
	}
	// ` ?[^\s\p{L}\p{N}]+`, llama: then [\r\n]*
	j := -1
	if isOther(r) {
		j = g.run(s, i, isOther, 0)
	} else if r == ' ' && next >= 0 && isOther(next) {
		j = g.run(s, i+1, isOther, 0)
	}
	if j >= 0 {
		if g.llama {
			j = g.run(s, j, func(r rune) bool { return r == '\r' || r == '\n' }, 0)
		}
		return j
	}
	_ = nsize
	// r is whitespace.
	end := g.run(s, i, isS, 0)
	if g.llama {
		// \s*[\r\n]+: up to the run's last \r or \n.
		for k := end - 1; k >= i; k-- {
			if s[k] == '\r' || s[k] == '\n' {
				return k + 1
			}
		}
	}
	// \s+(?!\S): the run, or all of it but its last character when a
	// non-space follows; \s+ otherwise.
	if end == len(s) {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(s[i:end])
	if end-last > i {
		return end - last
	}
	return end
}

// regexPattern is a regex pattern on Go's regexp.
type regexPattern struct{ re *regexp.Regexp }

func (p regexPattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	prev := 0
	for _, m := range p.re.FindAllStringIndex(s, -1) {
		if prev != m[0] {
			out = append(out, match{prev, m[0], false})
		}
		out = append(out, match{m[0], m[1], true})
		prev = m[1]
	}
	if prev != len(s) {
		out = append(out, match{prev, len(s), false})
	}
	return out
}

// compileRegex compiles a tokenizer.json regex (Oniguruma syntax).
func compileRegex(p string) (pattern, error) {
	switch p {
	case gpt2Regex:
		return gpt2Pattern, nil
	case llama3Regex:
		return gptScanner{maxDigits: 3, llama: true}, nil
	case qwenRegex:
		return gptScanner{maxDigits: 1, llama: true}, nil
	}
	for _, look := range []string{"(?=", "(?!", "(?<=", "(?<!", "(?>", `\G`, `\K`} {
		if strings.Contains(p, look) {
			return nil, fmt.Errorf("regex %q: %s (lookaround and other backtracking constructs) is not supported", p, look)
		}
	}
	re, err := regexp.Compile(unicodeClasses(p))
	if err != nil {
		return nil, fmt.Errorf("regex %q: %v", p, err)
	}
	return regexPattern{re}, nil
}

// unicodeClasses rewrites \s \S \d \D \w \W as Oniguruma's Unicode classes
// (RE2's are ASCII).
func unicodeClasses(p string) string {
	const (
		sp = `\t\n\v\f\r \x{85}\p{Z}`
		wd = `\p{L}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}`
	)
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			d := p[i+1]
			var rep string
			switch d {
			case 's':
				rep = sp
			case 'd':
				rep = `\p{Nd}`
			case 'w':
				rep = wd
			case 'S', 'D', 'W':
				if !inClass {
					m := map[byte]string{'S': sp, 'D': `\p{Nd}`, 'W': wd}
					sb.WriteString("[^" + m[d] + "]")
					i++
					continue
				}
			}
			if rep != "" {
				if inClass {
					sb.WriteString(rep)
				} else {
					sb.WriteString("[" + rep + "]")
				}
			} else {
				sb.WriteByte(c)
				sb.WriteByte(d)
			}
			i++
			continue
		}
		if c == '[' && !inClass {
			inClass = true
		} else if c == ']' && inClass {
			inClass = false
		}
		sb.WriteByte(c)
	}
	return sb.String()
}
