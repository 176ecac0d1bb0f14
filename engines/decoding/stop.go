package decoding

import (
	"strings"
	"unicode/utf8"
)

// FinishReason is why a sequence ended, as OpenAI names it; "" while it
// goes on.
type FinishReason string

const (
	FinishNone   FinishReason = ""
	FinishStop   FinishReason = "stop"   // eos, a stop id or a stop string
	FinishLength FinishReason = "length" // max_tokens
)

// StopMatcher decides when a sequence ends and what text it emits. It is fed
// each token with the text that token adds (an incremental detokenizer's
// piece, engines/tokenizer's DecodeStream), and holds back the text that
// could be the start of a stop string, or an unfinished UTF-8 character, until
// the next pieces settle it.
type StopMatcher struct {
	stops     []string
	stopIDs   []int32
	eos       []int32
	ignoreEOS bool
	max, min  int

	n      int
	held   string
	reason FinishReason
	stop   string
}

// NewStopMatcher starts the stop conditions of p.
func NewStopMatcher(p Params) *StopMatcher {
	return &StopMatcher{stops: p.Stop, stopIDs: p.StopTokenIDs, eos: p.EOSTokenIDs,
		ignoreEOS: p.IgnoreEOS, max: p.MaxTokens, min: p.MinTokens}
}

// Push adds the next token and its text piece. It returns the text to emit
// now and, once the sequence is over, the finish reason; after that, Push
// must not be called again. Stop ids' and eos ids' text is not emitted, nor
// is a stop string or anything after it; at max_tokens all held text is.
func (m *StopMatcher) Push(token int32, piece string) (emit string, reason FinishReason) {
	if m.reason != FinishNone {
		panic("decoding: StopMatcher.Push after the sequence finished")
	}
	m.n++
	if m.n > m.min && (contains(m.stopIDs, token) || (!m.ignoreEOS && contains(m.eos, token))) {
		return m.finish(FinishStop, len(m.held))
	}
	from := max(len(m.held)-m.maxStopLen()+1, 0) // a new match ends in piece
	m.held += piece
	if m.n > m.min {
		at := -1
		for _, s := range m.stops {
			if i := strings.Index(m.held[from:], s); i >= 0 && (at < 0 || from+i < at) {
				at, m.stop = from+i, s
			}
		}
		if at >= 0 {
			return m.finish(FinishStop, at)
		}
	}
	if m.max > 0 && m.n >= m.max {
		return m.finish(FinishLength, len(m.held))
	}
	keep := m.pending()
	emit, m.held = m.held[:len(m.held)-keep], m.held[len(m.held)-keep:]
	return emit, FinishNone
}

func (m *StopMatcher) finish(r FinishReason, upTo int) (string, FinishReason) {
	m.reason = r
	emit := m.held[:upTo]
	m.held = ""
	return emit, r
}

// Reason is the finish reason, "" while the sequence goes on.
func (m *StopMatcher) Reason() FinishReason { return m.reason }

// StopString is the stop string that ended the sequence, if one did.
func (m *StopMatcher) StopString() string { return m.stop }

// Held is the text held back so far (a possible start of a stop string).
func (m *StopMatcher) Held() string { return m.held }

// Flush ends the sequence for a reason of the caller's (a deadline, a
// disconnect) and returns the held text.
func (m *StopMatcher) Flush() string {
	h := m.held
	m.held = ""
	return h
}

// pending is how many bytes at the end of held must wait: the longest
// suffix that is a proper prefix of a stop string, or an unfinished UTF-8
// character.
func (m *StopMatcher) pending() int {
	h := m.held
	keep := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(h)); k > keep; k-- {
			if strings.HasSuffix(h, s[:k]) {
				keep = k
				break
			}
		}
	}
	// An unfinished character: a lead byte in the last 3 bytes whose
	// character does not fit.
	for i := len(h) - 1; i >= 0 && i >= len(h)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(h[i]) {
			if !utf8.FullRuneInString(h[i:]) {
				keep = max(keep, len(h)-i)
			}
			break
		}
	}
	return keep
}

func (m *StopMatcher) maxStopLen() int {
	n := 0
	for _, s := range m.stops {
		n = max(n, len(s))
	}
	return n
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
