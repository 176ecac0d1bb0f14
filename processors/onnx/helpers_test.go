package onnx

import (
	"context"
	"testing"

	"github.com/eas-server/eas-server/processors"
)

// checked makes Payloads of tensor payloads as the KServe doors do
// (FromTensors), failing the test on a refusal.
func checked(t testing.TB, m *Model, tps ...*processors.TensorPayload) []*Payload {
	t.Helper()
	out := make([]*Payload, len(tps))
	for i, tp := range tps {
		p, err := m.FromTensors(t.Context(), tp)
		if err != nil {
			t.Fatalf("payload %d refused: %v", i, err)
		}
		out[i] = p
	}
	return out
}

// keyOf is m's batch key for tp; ok is false when tp does not fit the
// model (it would be refused before reaching the scheduler) or runs alone.
func keyOf(m *Model, tp *processors.TensorPayload) (string, bool) {
	p, err := m.FromTensors(context.Background(), tp)
	if err != nil {
		return "", false
	}
	return m.BatchKey(p)
}
