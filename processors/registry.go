package processors

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory makes a new, unconfigured processor, adapted for the server:
// func() *Engine { return Adapt[P, R](newProcessor()) }.
type Factory func() *Engine

// Info describes a registered code for `eas-server processors`.
type Info struct {
	Code        string
	Description string
	Factory     Factory
}

var (
	mu       sync.RWMutex
	registry = map[string]Info{}
)

// Register makes a processor available under code. It is meant to be called
// from init and panics on an empty code, a nil factory or a duplicate.
func Register(code, description string, f Factory) {
	if code == "" {
		panic("processors: Register with empty code")
	}
	if f == nil {
		panic("processors: Register " + code + " with nil factory")
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[code]; dup {
		panic("processors: Register called twice for " + code)
	}
	registry[code] = Info{Code: code, Description: description, Factory: f}
}

// New makes a processor for code.
func New(code string) (*Engine, error) {
	mu.RLock()
	info, ok := registry[code]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown processor %q (known: %s)", code, strings.Join(Codes(), ", "))
	}
	return info.Factory(), nil
}

// Codes lists the registered codes, sorted.
func Codes() []string {
	mu.RLock()
	defer mu.RUnlock()
	codes := make([]string, 0, len(registry))
	for c := range registry {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes
}

// Lookup returns the registration of code.
func Lookup(code string) (Info, bool) {
	mu.RLock()
	defer mu.RUnlock()
	info, ok := registry[code]
	return info, ok
}

// custom is the runtime of custom processors; package custom installs it
// (processors/all imports that package).
var custom *CustomRuntime

// CustomRuntime makes custom processors.
type CustomRuntime struct {
	// New makes the processor of a custom processor_type.
	New func(processorType string) (*Engine, error)
	// WithHooks wraps a built-in processor so that its Configure and Load
	// also set up the Spec's PreProcess and PostProcess, and each request
	// runs through them.
	WithHooks func(inner *Engine) *Engine
}

// RegisterCustom installs the custom processor runtime. Meant to be called
// from init.
func RegisterCustom(r CustomRuntime) {
	mu.Lock()
	defer mu.Unlock()
	if custom != nil {
		panic("processors: RegisterCustom called twice")
	}
	custom = &r
}

func customRuntime(what string) (*CustomRuntime, error) {
	mu.RLock()
	defer mu.RUnlock()
	if custom == nil {
		return nil, fmt.Errorf("%s: custom processors are not built into this binary", what)
	}
	return custom, nil
}

// NewCustom makes the processor for a custom processor_type.
func NewCustom(processorType string) (*Engine, error) {
	r, err := customRuntime("processor_type " + processorType)
	if err != nil {
		return nil, err
	}
	return r.New(processorType)
}

// WithHooks wraps inner to run pre_process and post_process around it.
func WithHooks(inner *Engine) (*Engine, error) {
	r, err := customRuntime("pre_process/post_process")
	if err != nil {
		return nil, err
	}
	return r.WithHooks(inner), nil
}
