package tensorflow

import (
	"context"
	"fmt"
	"os"

	"github.com/eas-server/eas-server/processors"
)

// maxWarmupBytes bounds the warm-up file, one request body.
const maxWarmupBytes = 64 << 20

// Warmup replays warm_up_data_path before the service reports ready: the
// file is one serialized PredictRequest, as the EAS SDK's
// TFRequest.to_string() writes it. It runs once, so the first real request
// does not pay for ONNX Runtime's lazy initialisation.
func (m *Model) Warmup(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %w", err)
	}
	if st.Size() > maxWarmupBytes {
		return fmt.Errorf("warm_up_data_path: %s is %d bytes, more than the %d a request may have", path, st.Size(), maxWarmupBytes)
	}
	body, err := processors.ReadModel(ctx, path, maxWarmupBytes)
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %w", err)
	}
	p, err := m.Decode(&processors.Request{Body: body})
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %s is not a TF PredictRequest the model accepts: %w", path, err)
	}
	if _, err := m.Run(ctx, []*request{p}); err != nil {
		return fmt.Errorf("warm_up_data_path: running the warm-up request: %w", err)
	}
	return nil
}
