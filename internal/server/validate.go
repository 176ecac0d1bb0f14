package server

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// ValidateAnswer answers POST /api/v2/validate, with 200 whether the file
// is valid or not (the check itself succeeded; an editor checking as the
// user types would otherwise fill the browser's log with failed requests):
// Valid, with the keys that have no effect here, or the problems create
// would refuse it for, each apart so that an editor can mark each.
type ValidateAnswer struct {
	Valid bool
	// Message is every problem, one per line, as create words them; ""
	// when valid.
	Message  string            `json:",omitempty"`
	Problems []ValidateProblem `json:",omitempty"`
	Warnings []ValidateWarning
}

// ValidateWarning is one key accepted for EAS compatibility that has no
// effect on this server (servicejson's Warning).
type ValidateWarning struct {
	Path    string // canonical dotted key or section, e.g. metadata.memory
	Message string
}

// ValidateProblem is one problem of a service.json.
type ValidateProblem struct {
	// Path is servicejson's dotted key of the problem: canonical, and for
	// an unknown key the key as written below its canonical section
	// (metdata, metadata.rpc.keepalve); "" when the problem concerns the
	// whole document (JSON syntax) or names no key.
	Path    string
	Line    int // 1-based, of a JSON syntax error; 0 otherwise
	Column  int // 1-based, in characters, of a JSON syntax error; 0 otherwise
	Message string
}

// validateSpec runs on a service.json what create runs before it accepts
// one (readSpec's parse and processor lookup, then service.Precheck: the
// processor's Configure without I/O) and changes nothing: the console's
// editor checks a file with it before sending it.
func (s *Server) validateSpec(c *gin.Context) {
	body, ok := readControlBody(c)
	if !ok {
		return
	}
	spec, err := servicejson.Parse(body)
	if err != nil {
		var errs *servicejson.Errors
		if !errors.As(err, &errs) {
			validateFail(c, err.Error(), processorProblem(err.Error()))
			return
		}
		probs := make([]ValidateProblem, 0, len(errs.Problems))
		for _, p := range errs.Problems {
			probs = append(probs, ValidateProblem{Path: p.Path, Line: p.Line, Column: p.Column, Message: p.Msg})
		}
		validateFail(c, errs.Error(), probs...)
		return
	}
	if spec.Processor != "" {
		if _, ok := processors.Lookup(spec.Processor); !ok {
			_, err := processors.New(spec.Processor)
			msg := fmt.Sprintf("%q is an EAS code this server does not serve: %v", spec.Processor, err)
			validateFail(c, "processor: "+msg, ValidateProblem{Path: "processor", Message: msg})
			return
		}
	}
	if err := service.Precheck(spec, 0); err != nil {
		msg := strings.TrimPrefix(err.Error(), service.ErrInvalid.Error()+": ")
		validateFail(c, msg, processorProblem(msg))
		return
	}
	out := ValidateAnswer{Valid: true, Warnings: []ValidateWarning{}}
	for _, w := range spec.Warnings() {
		if k, ok := s.control().(keyEffects); ok && k.TakesEffect(w.Path) {
			continue
		}
		out.Warnings = append(out.Warnings, ValidateWarning{Path: w.Path, Message: w.Msg})
	}
	c.JSON(http.StatusOK, out)
}

// validateFail answers an invalid file with its problems; msg is all of
// them, one per line, as create words them.
func validateFail(c *gin.Context, msg string, probs ...ValidateProblem) {
	c.PureJSON(http.StatusOK, ValidateAnswer{Valid: false, Message: capMsg(msg), Problems: probs, Warnings: []ValidateWarning{}})
}

// leadingKey is the "key: " that starts a processor's message.
var leadingKey = regexp.MustCompile(`^([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*): `)

// keyPaths is every key path of a service.json: the keys Parse reads and
// the sections that hold them.
var keyPaths = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	for _, k := range servicejson.KnownKeys() {
		out[k] = true
		for i := range len(k) {
			if k[i] == '.' {
				out[k[:i]] = true
			}
		}
	}
	return out
})

// processorProblem places a processor's (or Precheck's) message on the
// key it starts with, "model_path: required ..." on model_path. A key
// inside a value the processor reads (model_config.sleep_ms) is placed on
// the deepest service.json key above it (model_config), the message kept
// whole; a message that starts with no key gets Path "".
func processorProblem(msg string) ValidateProblem {
	m := leadingKey.FindStringSubmatch(msg)
	if m == nil {
		return ValidateProblem{Message: msg}
	}
	key := m[1]
	if keyPaths()[key] {
		return ValidateProblem{Path: key, Message: msg[len(m[0]):]}
	}
	for i := len(key) - 1; i > 0; i-- {
		if key[i] == '.' && keyPaths()[key[:i]] {
			return ValidateProblem{Path: key[:i], Message: msg}
		}
	}
	return ValidateProblem{Message: msg}
}
