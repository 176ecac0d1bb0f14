package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// span is a range of bytes of the original text.
type span struct{ a, b int32 }

// normString is a piece of text as the pipeline has changed it so far
// (norm) beside the original piece it came from (orig), with, for every
// byte of norm, the range of orig it stands for: what lets a token's
// offsets be given in the caller's text. It follows Hugging Face
// tokenizers' NormalizedString rule for rule (which byte a replaced,
// inserted or removed character takes its alignment from), since the
// offsets are compared with it exactly.
//
// align nil means norm == orig with each byte aligned to its whole
// character (the state before any change, kept unmaterialised because most
// pieces of byte-level tokenizers never change before the model). The
// values in align are relative to orig after subtracting sub: a slice
// shares its parent's array and only moves sub.
type normString struct {
	origLen int // length of the original piece (its text is not kept)
	norm    string
	align   []span
	sub     int32
	shift   int // orig's byte offset in the whole text
}

func newNormString(s string) normString { return normString{origLen: len(s), norm: s} }

// alignAt is the alignment of byte i of norm, relative to orig.
func (n *normString) alignAt(i int) span {
	if n.align == nil {
		s := i
		for s > 0 && !utf8.RuneStart(n.norm[s]) {
			s--
		}
		_, size := utf8.DecodeRuneInString(n.norm[s:])
		return span{int32(s), int32(s + size)}
	}
	a := n.align[i]
	return span{a.a - n.sub, a.b - n.sub}
}

// rawAt is alignAt in the stored coordinates (sub not subtracted).
func (n *normString) rawAt(i int) span {
	if n.align == nil {
		a := n.alignAt(i)
		return span{a.a + n.sub, a.b + n.sub}
	}
	return n.align[i]
}

func (n *normString) materialize() {
	if n.align != nil {
		return
	}
	al := make([]span, len(n.norm))
	for i, r := range n.norm {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(n.norm[i:])
		}
		for k := 0; k < size; k++ {
			al[i+k] = span{int32(i) + n.sub, int32(i+size) + n.sub}
		}
	}
	n.align = al
}

// toOriginal converts a range of norm to a range of orig (relative), as
// NormalizedString.convert_offsets does: an empty range is returned as is.
func (n *normString) toOriginal(s, e int) (int, int, bool) {
	if s == e {
		return s, e, true
	}
	if s > e || e > len(n.norm) {
		return 0, 0, false
	}
	if n.align == nil {
		a, b := n.alignAt(s), n.alignAt(e-1)
		return int(a.a), int(b.b), true
	}
	return int(n.align[s].a - n.sub), int(n.align[e-1].b - n.sub), true
}

// slice is the piece of n over norm[s:e].
func (n *normString) slice(s, e int) (normString, bool) {
	if s < 0 || e > len(n.norm) || s > e {
		return normString{}, false
	}
	os, oe, ok := n.toOriginal(s, e)
	if !ok {
		return normString{}, false
	}
	if n.align == nil {
		return normString{origLen: e - s, norm: n.norm[s:e], shift: n.shift + s, sub: n.sub}, true
	}
	origLen := 0
	if os >= 0 && oe <= n.origLen && os <= oe {
		origLen = oe - os
	}
	return normString{origLen: origLen, norm: n.norm[s:e], align: n.align[s:e], sub: n.sub + int32(os), shift: n.shift + os}, true
}

// change is one character of a transformation: ch 0 replaces the next
// character of the old text, ch > 0 inserts (aligned with the character
// before), ch < 0 replaces the next character and removes -ch more.
type change struct {
	r  rune
	ch int
}

// fullRange is the range of norm that the whole of orig maps to
// (transform's Range::Original(..)): normalized bytes before the first one
// with a non-empty alignment are left out.
func (n *normString) fullRange() (int, int, bool) {
	if len(n.norm) == 0 {
		return 0, 0, n.origLen == 0
	}
	if n.align == nil {
		return 0, len(n.norm), true
	}
	for i, a := range n.align {
		if a.a != a.b {
			return i, len(n.norm), true
		}
	}
	return 0, 0, false
}

func (n *normString) transform(cs []change, initialOffset int) {
	s, e, ok := n.fullRange()
	if !ok {
		return
	}
	n.transformRange(s, e, cs, initialOffset)
}

// transformRange replaces norm[s:e] by the changes, aligning each new
// character as NormalizedString.transform_range does.
func (n *normString) transformRange(s, e int, cs []change, initialOffset int) {
	n.materialize()
	old := n.norm[s:e]
	pos := 0 // cursor in old
	next := func() int {
		if pos >= len(old) {
			return 0
		}
		_, size := utf8.DecodeRuneInString(old[pos:])
		pos += size
		return size
	}
	for k := 0; k < initialOffset; k++ {
		next()
	}
	var sb strings.Builder
	sb.Grow(len(old) + 8)
	al := make([]span, 0, len(n.align)+len(cs))
	al = append(al, n.align[:s]...)
	for _, c := range cs {
		idx := s + pos
		var a span
		if c.ch > 0 {
			if idx < 1 {
				a = span{n.sub, n.sub}
			} else {
				a = n.align[min(idx-1, len(n.align)-1)]
			}
		} else if idx < len(n.align) {
			a = n.align[idx]
		} else if len(n.align) > 0 {
			a = n.align[len(n.align)-1]
		}
		if c.ch <= 0 {
			next()
			for k := 0; k < -c.ch; k++ {
				next()
			}
		}
		size := utf8.RuneLen(c.r)
		if size < 0 {
			size = 3
		}
		sb.WriteRune(c.r)
		for k := 0; k < size; k++ {
			al = append(al, a)
		}
	}
	al = append(al, n.align[e:]...)
	n.norm = n.norm[:s] + sb.String() + n.norm[e:]
	n.align = al
}

// mapRunes replaces each character by f's; characters of the same length
// keep their alignment, so when all do, only the text changes.
func (n *normString) mapRunes(f func(rune) rune) {
	same, changed := true, false
	for _, r := range n.norm {
		m := f(r)
		if m != r {
			changed = true
			if utf8.RuneLen(m) != utf8.RuneLen(r) {
				same = false
				break
			}
		}
	}
	if !changed {
		return
	}
	if same {
		if n.align == nil {
			n.materialize()
		}
		n.norm = strings.Map(f, n.norm)
		return
	}
	cs := make([]change, 0, len(n.norm))
	for _, r := range n.norm {
		cs = append(cs, change{f(r), 0})
	}
	n.transform(cs, 0)
}

// filter keeps the characters keep accepts (NormalizedString.filter): a
// kept character followed by removed ones replaces itself and removes
// them; removed characters before the first kept one go with no trace.
// Only the places with removals are rewritten.
func (n *normString) filter(keep func(rune) bool) {
	var edits []edit
	lastKept := -1 // byte index of the last kept character
	runStart := -1 // start of the current run of removed characters
	var lastR rune
	flush := func(end int) {
		if runStart < 0 {
			return
		}
		k := utf8.RuneCountInString(n.norm[runStart:end])
		if lastKept < 0 {
			edits = append(edits, edit{0, end, nil})
		} else {
			edits = append(edits, edit{lastKept, end, []change{{lastR, -k}}})
		}
		runStart = -1
	}
	for i, r := range n.norm {
		if keep(r) {
			flush(i)
			lastKept, lastR = i, r
		} else if runStart < 0 {
			runStart = i
		}
	}
	flush(len(n.norm))
	n.applyEdits(edits)
}

// prepend puts s before the text (nothing on an empty text).
func (n *normString) prepend(s string) {
	if n.norm == "" {
		return
	}
	first, size := utf8.DecodeRuneInString(n.norm)
	cs := make([]change, 0, len(s)+1)
	i := 0
	for _, r := range s {
		ch := 0
		if i > 0 {
			ch = 1
		}
		cs = append(cs, change{r, ch})
		i++
	}
	cs = append(cs, change{first, 1})
	n.transformRange(0, size, cs, 0)
}

// replace substitutes content for every match of p
// (NormalizedString.replace): each new character is an insertion aligned
// with the byte before the match's end.
func (n *normString) replace(p pattern, content string) {
	ms := p.findMatches(n.norm)
	any := false
	for _, m := range ms {
		if m.match {
			any = true
			break
		}
	}
	if !any {
		return
	}
	n.materialize()
	var sb strings.Builder
	sb.Grow(len(n.norm) + len(content))
	al := make([]span, 0, len(n.align)+len(content))
	last := 0
	for _, m := range ms {
		if !m.match {
			continue
		}
		sb.WriteString(n.norm[last:m.s])
		al = append(al, n.align[last:m.s]...)
		idx := m.e
		var a span
		if idx < 1 {
			a = span{n.sub, n.sub}
		} else {
			a = n.align[idx-1]
		}
		for _, r := range content {
			size := utf8.RuneLen(r)
			sb.WriteRune(r)
			for k := 0; k < size; k++ {
				al = append(al, a)
			}
		}
		last = m.e
	}
	sb.WriteString(n.norm[last:])
	al = append(al, n.align[last:]...)
	n.norm = sb.String()
	n.align = al
}

// lrstrip removes leading and/or trailing whitespace.
func (n *normString) lrstrip(left, right bool) {
	lead, trail := 0, 0
	if left {
		for _, r := range n.norm {
			if !isSpace(r) {
				break
			}
			lead++
		}
	}
	count := utf8.RuneCountInString(n.norm)
	if right {
		for i := len(n.norm); i > 0; {
			r, size := utf8.DecodeLastRuneInString(n.norm[:i])
			if !isSpace(r) {
				break
			}
			trail++
			i -= size
		}
	}
	if lead == 0 && trail == 0 {
		return
	}
	cs := make([]change, 0, count)
	i := 0
	for _, r := range n.norm {
		switch {
		case i < lead || i >= count-trail:
		case i == len(n.norm)-trail-1: // bytes, not characters, as tokenizers compares
			cs = append(cs, change{r, -trail})
		default:
			cs = append(cs, change{r, 0})
		}
		i++
	}
	n.transform(cs, lead)
}

// match is a piece of a text a pattern found (match) or the gap between two.
type match struct {
	s, e  int
	match bool
}

type pattern interface {
	findMatches(s string) []match
}

// runePattern matches every character pred accepts, one at a time.
type runePattern func(rune) bool

func (p runePattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	last := 0
	for i, r := range s {
		if p(r) {
			if last < i {
				out = append(out, match{last, i, false})
			}
			size := utf8.RuneLen(r)
			if r == utf8.RuneError {
				_, size = utf8.DecodeRuneInString(s[i:])
			}
			out = append(out, match{i, i + size, true})
			last = i + size
		}
	}
	if last < len(s) {
		out = append(out, match{last, len(s), false})
	}
	return out
}

// stringPattern matches the non-overlapping occurrences of a string.
type stringPattern string

func (p stringPattern) findMatches(s string) []match {
	if p == "" {
		return []match{{0, utf8.RuneCountInString(s), false}}
	}
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	prev := 0
	for i := 0; i <= len(s)-len(p); {
		k := strings.Index(s[i:], string(p))
		if k < 0 {
			break
		}
		st := i + k
		if prev != st {
			out = append(out, match{prev, st, false})
		}
		out = append(out, match{st, st + len(p), true})
		prev = st + len(p)
		i = prev
	}
	if prev != len(s) {
		out = append(out, match{prev, len(s), false})
	}
	return out
}

type invertPattern struct{ p pattern }

func (p invertPattern) findMatches(s string) []match {
	ms := p.p.findMatches(s)
	for i := range ms {
		ms[i].match = !ms[i].match
	}
	return ms
}

// Split behaviours (SplitDelimiterBehavior).
const (
	splitRemoved = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

// splitBy cuts n where p matches, keeping or merging the matches as the
// behaviour says; empty pieces are dropped by the caller.
func (n *normString) splitBy(p pattern, behavior int, out []normString) []normString {
	if rp, ok := p.(runePattern); ok && (behavior == splitRemoved || behavior == splitIsolated) {
		return n.splitRunes(rp, behavior == splitIsolated, out)
	}
	ms := p.findMatches(n.norm)
	type piece struct {
		s, e   int
		remove bool
	}
	var ps []piece
	switch behavior {
	case splitIsolated:
		ps = make([]piece, len(ms))
		for i, m := range ms {
			ps[i] = piece{m.s, m.e, false}
		}
	case splitRemoved:
		ps = make([]piece, len(ms))
		for i, m := range ms {
			ps[i] = piece{m.s, m.e, m.match}
		}
	case splitContiguous:
		prev := false
		for _, m := range ms {
			if m.match == prev && len(ps) > 0 {
				ps[len(ps)-1].e = m.e
			} else {
				ps = append(ps, piece{m.s, m.e, false})
			}
			prev = m.match
		}
	case splitMergedWithPrevious:
		prev := false
		for _, m := range ms {
			if m.match && !prev && len(ps) > 0 {
				ps[len(ps)-1].e = m.e
			} else {
				ps = append(ps, piece{m.s, m.e, false})
			}
			prev = m.match
		}
	case splitMergedWithNext:
		prev := false
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			if m.match && !prev && len(ps) > 0 {
				ps[len(ps)-1].s = m.s
			} else {
				ps = append(ps, piece{m.s, m.e, false})
			}
			prev = m.match
		}
		for i, j := 0, len(ps)-1; i < j; i, j = i+1, j-1 {
			ps[i], ps[j] = ps[j], ps[i]
		}
	}
	for _, p := range ps {
		if p.remove {
			continue
		}
		if sl, ok := n.slice(p.s, p.e); ok {
			out = append(out, sl)
		}
	}
	return out
}

// splitRunes is splitBy for a runePattern, removing or isolating each
// matching character, without building the matches.
func (n *normString) splitRunes(p runePattern, keep bool, out []normString) []normString {
	s := n.norm
	last := 0
	emit := func(a, b int) {
		if sl, ok := n.slice(a, b); ok {
			out = append(out, sl)
		}
	}
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if p(r) {
			if last < i {
				emit(last, i)
			}
			if keep {
				emit(i, i+size)
			}
			last = i + size
		}
		i += size
	}
	if last < len(s) || len(s) == 0 {
		emit(last, len(s))
	}
	return out
}

// edit is a transformation of norm[s:e] alone.
type edit struct {
	s, e int
	cs   []change
}

// applyEdits applies non-overlapping edits in order of position in one
// pass, each as transformRange would.
func (n *normString) applyEdits(edits []edit) {
	if len(edits) == 0 {
		return
	}
	n.materialize()
	var sb strings.Builder
	sb.Grow(len(n.norm) + 16)
	al := make([]span, 0, len(n.align)+16)
	last := 0
	for _, ed := range edits {
		sb.WriteString(n.norm[last:ed.s])
		al = append(al, n.align[last:ed.s]...)
		old := n.norm[ed.s:ed.e]
		pos := 0
		for _, c := range ed.cs {
			idx := ed.s + pos
			var a span
			switch {
			case c.ch > 0 && idx < 1:
				a = span{n.sub, n.sub}
			case c.ch > 0:
				a = n.align[min(idx-1, len(n.align)-1)]
			case idx < len(n.align):
				a = n.align[idx]
			default:
				a = n.align[len(n.align)-1]
			}
			if c.ch <= 0 {
				for k := 0; k <= -c.ch && pos < len(old); k++ {
					_, size := utf8.DecodeRuneInString(old[pos:])
					pos += size
				}
			}
			size := utf8.RuneLen(c.r)
			if size < 0 {
				size = 3
			}
			sb.WriteRune(c.r)
			for k := 0; k < size; k++ {
				al = append(al, a)
			}
		}
		last = ed.e
	}
	sb.WriteString(n.norm[last:])
	al = append(al, n.align[last:]...)
	n.norm = sb.String()
	n.align = al
}
