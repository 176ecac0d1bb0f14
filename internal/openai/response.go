package openai

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/scheduler"
)

// The answers' JSON, in OpenAI's shapes and field order. A client decodes
// them with these types too (the end-to-end tests do).
type (
	// Usage counts a request's tokens: the prompts' (each once, whatever
	// n) and the generated ones over every choice.
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}

	// Completion is /v1/completions' answer (object "text_completion"),
	// and each chunk of its stream (FinishReason null until a choice's
	// last chunk, Usage only in the last chunk when asked).
	Completion struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []CompletionChoice `json:"choices"`
		Usage   *Usage             `json:"usage,omitempty"`
	}
	CompletionChoice struct {
		Index        int                 `json:"index"`
		Text         string              `json:"text"`
		Logprobs     *CompletionLogprobs `json:"logprobs"`
		FinishReason *string             `json:"finish_reason"`
	}
	// CompletionLogprobs are the legacy API's logprobs: per generated
	// token its text, logprob, the top alternatives (text to logprob; null
	// when logprobs was 0) and its offset in the choice's text
	// (characters, counting the echoed prompt).
	CompletionLogprobs struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}

	// ChatCompletion is /v1/chat/completions' answer (object
	// "chat.completion").
	ChatCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []ChatChoice `json:"choices"`
		Usage   *Usage       `json:"usage,omitempty"`
	}
	ChatChoice struct {
		Index        int           `json:"index"`
		Message      ChatMessage   `json:"message"`
		Logprobs     *ChatLogprobs `json:"logprobs"`
		FinishReason string        `json:"finish_reason"`
	}
	ChatMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	// ChatLogprobs are the chat API's logprobs: one entry per generated
	// token.
	ChatLogprobs struct {
		Content []ChatTokenLogprob `json:"content"`
	}
	// ChatTokenLogprob is a token's text, logprob, UTF-8 bytes (of the
	// text: U+FFFD's where a token holds part of a character, as vLLM
	// gives them) and the top alternatives.
	ChatTokenLogprob struct {
		Token       string       `json:"token"`
		Logprob     float64      `json:"logprob"`
		Bytes       []int        `json:"bytes"`
		TopLogprobs []TopLogprob `json:"top_logprobs"`
	}
	TopLogprob struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}

	// ChatCompletionChunk is one event of a chat stream (object
	// "chat.completion.chunk"): a choice's first chunk has the role, the
	// next ones content, its last one the finish reason; with
	// stream_options.include_usage a last chunk has no choices and the
	// usage.
	ChatCompletionChunk struct {
		ID      string            `json:"id"`
		Object  string            `json:"object"`
		Created int64             `json:"created"`
		Model   string            `json:"model"`
		Choices []ChatChunkChoice `json:"choices"`
		Usage   *Usage            `json:"usage,omitempty"`
	}
	ChatChunkChoice struct {
		Index        int           `json:"index"`
		Delta        ChatDelta     `json:"delta"`
		Logprobs     *ChatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	}
	ChatDelta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}

	// ModelList is GET /v1/models' answer.
	ModelList struct {
		Object string  `json:"object"` // "list"
		Data   []Model `json:"data"`
	}
	// Model is one served model; MaxModelLen (vLLM's field) is its
	// context length.
	Model struct {
		ID          string `json:"id"`
		Object      string `json:"object"` // "model"
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		MaxModelLen int    `json:"max_model_len"`
	}

	// ErrorBody is OpenAI's error answer, also sent as a stream's event
	// when a stream fails.
	ErrorBody struct {
		Error ErrorObject `json:"error"`
	}
	ErrorObject struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
)

// newID is an answer's id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// lp is a logprob as JSON can carry it: -Inf (a token the filters removed)
// becomes -9999, vLLM's stand-in.
func lp(x float32) float64 {
	if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
		return -9999
	}
	return float64(x)
}

// utf8Bytes is s's bytes as JSON numbers.
func utf8Bytes(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// answer turns one request's events into OpenAI's answer or chunks. It is
// used by one goroutine.
type answer struct {
	chat        bool
	id          string
	created     int64
	model       string
	n           int
	jobs        []job
	choices     []*choiceState
	tok         *tokenizer.Tokenizer
	logprobs    bool
	top         int
	includeStop bool
	tokenIDs    bool // logprobs name tokens "token_id:<id>" (vLLM's return_tokens_as_token_ids)
}

// choiceState is one choice's output so far.
type choiceState struct {
	text     strings.Builder
	finish   decoding.FinishReason
	ended    bool
	recent   []int32 // the last generated ids: the context of a token's text
	offset   int     // text_offset of the next token, in characters
	complete *CompletionLogprobs
	chat     []ChatTokenLogprob
}

// delta is what one event adds to one choice.
type delta struct {
	index    int
	text     string
	complete *CompletionLogprobs
	chat     []ChatTokenLogprob
	finish   string
}

func newAnswer(chat bool, s *sampling, jobs []job, model string, tok *tokenizer.Tokenizer, created int64) *answer {
	a := &answer{chat: chat, created: created, model: model, n: s.N, jobs: jobs, tok: tok,
		logprobs: s.Logprobs, top: s.TopLogprobs, includeStop: s.IncludeStopStr, tokenIDs: s.TokensAsIDs}
	if chat {
		a.id = newID("chatcmpl-")
	} else {
		a.id = newID("cmpl-")
	}
	a.choices = make([]*choiceState, len(jobs)*s.N)
	for i := range a.choices {
		c := &choiceState{}
		if e := jobs[i/s.N].Echo; e != "" {
			c.text.WriteString(e)
			c.offset = utf8.RuneCountInString(e)
		}
		a.choices[i] = c
	}
	return a
}

// apply records ev of job p and returns what it adds.
func (a *answer) apply(p int, ev scheduler.GenEvent) (delta, error) {
	if ev.Index < 0 || ev.Index >= a.n {
		return delta{}, fmt.Errorf("the scheduler sent an event for choice %d of %d", ev.Index, a.n)
	}
	idx := p*a.n + ev.Index
	c := a.choices[idx]
	if c.ended {
		return delta{}, fmt.Errorf("the scheduler sent an event for choice %d after its end", idx)
	}
	if ev.Err != nil {
		return delta{}, ev.Err
	}
	d := delta{index: idx, text: ev.Text}
	if a.logprobs && len(ev.Logprobs) > 0 {
		a.tokenLogprobs(c, &d, ev.Logprobs)
	}
	if ev.Finish != decoding.FinishNone {
		if a.includeStop && ev.Finish == decoding.FinishStop {
			d.text += ev.StopString
		}
		c.ended, c.finish, d.finish = true, ev.Finish, string(ev.Finish)
	}
	c.text.WriteString(d.text)
	return d, nil
}

// tokenLogprobs adds the logprobs of an event's tokens to c and d.
func (a *answer) tokenLogprobs(c *choiceState, d *delta, lps []scheduler.TokenLogprobs) {
	if !a.chat {
		d.complete = &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TextOffset: []int{}}
		if a.top > 0 {
			d.complete.TopLogprobs = []map[string]float64{}
		}
		if c.complete == nil {
			c.complete = &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TextOffset: []int{}}
			if a.top > 0 {
				c.complete.TopLogprobs = []map[string]float64{}
			}
		}
	}
	for _, t := range lps {
		prefix := a.decode(c.recent)
		text := a.tokenText(c.recent, prefix, t.Token)
		if a.chat {
			e := ChatTokenLogprob{Token: text, Logprob: lp(t.Logprob), Bytes: utf8Bytes(text), TopLogprobs: []TopLogprob{}}
			for _, alt := range t.Top {
				at := a.tokenText(c.recent, prefix, alt.Token)
				e.TopLogprobs = append(e.TopLogprobs, TopLogprob{Token: at, Logprob: lp(alt.Logprob), Bytes: utf8Bytes(at)})
			}
			d.chat = append(d.chat, e)
			c.chat = append(c.chat, e)
		} else {
			for _, l := range []*CompletionLogprobs{d.complete, c.complete} {
				l.Tokens = append(l.Tokens, text)
				l.TokenLogprobs = append(l.TokenLogprobs, lp(t.Logprob))
				l.TextOffset = append(l.TextOffset, c.offset)
			}
			if a.top > 0 {
				m := make(map[string]float64, len(t.Top))
				for _, alt := range t.Top { // most likely first: two ids of one text keep the likelier
					if k := a.tokenText(c.recent, prefix, alt.Token); !hasKey(m, k) {
						m[k] = lp(alt.Logprob)
					}
				}
				d.complete.TopLogprobs = append(d.complete.TopLogprobs, m)
				c.complete.TopLogprobs = append(c.complete.TopLogprobs, m)
			}
			c.offset += utf8.RuneCountInString(text)
		}
		c.recent = append(c.recent, t.Token)
		if len(c.recent) > contextTokens {
			c.recent = append(c.recent[:0], c.recent[len(c.recent)-contextTokens:]...)
		}
	}
}

// contextTokens is how many earlier tokens a token's text is decoded
// after: decoders that look at neighbours (a sentencepiece token's leading
// space, a character split over byte tokens) need a few.
const contextTokens = 4

func (a *answer) decode(ids []int32) string {
	s, _ := a.tok.Decode(ids, false)
	return s
}

// tokenText is the text id adds after the tokens recent (whose text is
// prefix), special tokens included: the token as the output would show it.
func (a *answer) tokenText(recent []int32, prefix string, id int32) string {
	if a.tokenIDs {
		return "token_id:" + strconv.Itoa(int(id))
	}
	ids := append(append(make([]int32, 0, len(recent)+1), recent...), id)
	if s := a.decode(ids); strings.HasPrefix(s, prefix) && len(s) > len(prefix) {
		return s[len(prefix):]
	}
	return a.decode([]int32{id})
}

// unfinished says which choice never ended, or -1.
func (a *answer) unfinished() int {
	for i, c := range a.choices {
		if !c.ended {
			return i
		}
	}
	return -1
}

// completion is the whole answer of /v1/completions.
func (a *answer) completion(u Usage) *Completion {
	out := &Completion{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
		Choices: make([]CompletionChoice, len(a.choices)), Usage: &u}
	for i, c := range a.choices {
		f := string(c.finish)
		out.Choices[i] = CompletionChoice{Index: i, Text: c.text.String(), FinishReason: &f}
		if a.logprobs {
			out.Choices[i].Logprobs = c.complete
			if c.complete == nil {
				out.Choices[i].Logprobs = &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TextOffset: []int{}}
			}
		}
	}
	return out
}

// chatCompletion is the whole answer of /v1/chat/completions.
func (a *answer) chatCompletion(u Usage) *ChatCompletion {
	out := &ChatCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
		Choices: make([]ChatChoice, len(a.choices)), Usage: &u}
	for i, c := range a.choices {
		out.Choices[i] = ChatChoice{Index: i, Message: ChatMessage{Role: "assistant", Content: c.text.String()},
			FinishReason: string(c.finish)}
		if a.logprobs {
			out.Choices[i].Logprobs = &ChatLogprobs{Content: c.chat}
			if c.chat == nil {
				out.Choices[i].Logprobs.Content = []ChatTokenLogprob{}
			}
		}
	}
	return out
}

// chunk is the stream's chunk for d.
func (a *answer) chunk(d delta) any {
	var finish *string
	if d.finish != "" {
		f := d.finish
		finish = &f
	}
	if a.chat {
		ch := ChatChunkChoice{Index: d.index, FinishReason: finish}
		if d.text != "" || d.finish == "" {
			t := d.text
			ch.Delta.Content = &t
		}
		if a.logprobs && d.chat != nil {
			ch.Logprobs = &ChatLogprobs{Content: d.chat}
		}
		return &ChatCompletionChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []ChatChunkChoice{ch}}
	}
	ch := CompletionChoice{Index: d.index, Text: d.text, FinishReason: finish}
	if a.logprobs && d.complete != nil {
		ch.Logprobs = d.complete
	}
	return &Completion{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
		Choices: []CompletionChoice{ch}}
}

// firstChunks open the stream: a chat choice's role, a completion choice's
// echoed prompt.
func (a *answer) firstChunks() []any {
	var out []any
	for i, c := range a.choices {
		if a.chat {
			empty := ""
			out = append(out, &ChatCompletionChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
				Choices: []ChatChunkChoice{{Index: i, Delta: ChatDelta{Role: "assistant", Content: &empty}}}})
		} else if c.text.Len() > 0 {
			out = append(out, &Completion{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
				Choices: []CompletionChoice{{Index: i, Text: c.text.String()}}})
		}
	}
	return out
}

// usageChunk is include_usage's last chunk.
func (a *answer) usageChunk(u Usage) any {
	if a.chat {
		return &ChatCompletionChunk{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []ChatChunkChoice{}, Usage: &u}
	}
	return &Completion{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
		Choices: []CompletionChoice{}, Usage: &u}
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}
