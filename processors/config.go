package processors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// DecodeConfig decodes model_config into dst (a pointer to the processor's
// config struct). It is the one reading of model_config every processor
// shares: absent, blank or null leaves dst as it is; an unknown key, a wrong
// type or trailing data is an error that says what the processor accepts
// (accepts, e.g. `{"sleep_ms": N}`).
func (s Spec) DecodeConfig(dst any, accepts string) error {
	raw := bytes.TrimSpace(s.ModelConfig)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, tokErr := dec.Token(); tokErr != io.EOF {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err != nil {
		return fmt.Errorf("model_config: %v; %s accepts %s", err, s.Code, accepts)
	}
	return nil
}

// IntraOpThreads is the thread count a runtime uses inside one operator:
// model_config's own setting (override > 0), else metadata.cpu, else
// GOMAXPROCS rather than NumCPU, since it follows a container's CPU limit
// and a pod does not oversubscribe its quota.
func (s Spec) IntraOpThreads(override int) int {
	switch {
	case override > 0:
		return override
	case s.CPU > 0:
		return s.CPU
	}
	return runtime.GOMAXPROCS(0)
}

// SplitConfig splits model_config between a processor that wraps another
// (easytransfer around tensorflow, easynlp around the onnx runtime) and the
// one it wraps: own holds the keys the wrapper reads, rest the others, for
// the wrapped processor's own strict parsing. Both are JSON objects, or nil
// when empty; model_config that is not an object is an error.
func SplitConfig(raw []byte, keys []string) (own, rest []byte, err error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, nil, errors.New("it must be a JSON object")
	}
	mine := map[string]json.RawMessage{}
	for _, k := range keys {
		if v, ok := obj[k]; ok {
			mine[k] = v
			delete(obj, k)
		}
	}
	if own, err = json.Marshal(mine); err != nil {
		return nil, nil, err
	}
	if len(obj) > 0 {
		if rest, err = json.Marshal(obj); err != nil {
			return nil, nil, err
		}
	}
	return own, rest, nil
}
