package tensorflow

import (
	"context"
	"fmt"

	"github.com/eas-server/eas-server/processors"
)

// Warmup replays warm_up_data_path before the service reports ready: one
// serialized PredictRequest, as the EAS SDK's TFRequest.to_string() writes
// it, or several in the format of processors.ReadWarmup. Each runs once,
// so the first real request does not pay for ONNX Runtime's lazy
// initialisation.
func (m *Model) Warmup(ctx context.Context, path string) error {
	bodies, err := processors.ReadWarmup(ctx, path)
	if err != nil {
		return err
	}
	for i, body := range bodies {
		p, err := m.Decode(ctx, &processors.Request{Body: body})
		if err != nil {
			return fmt.Errorf("warm_up_data_path: request %d of %d is not a TF PredictRequest the model accepts: %w", i+1, len(bodies), err)
		}
		if _, err := m.Run(ctx, []*request{p}); err != nil {
			return fmt.Errorf("warm_up_data_path: running request %d of %d: %w", i+1, len(bodies), err)
		}
	}
	return nil
}
