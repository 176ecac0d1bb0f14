package textencoder

import (
	"context"
	"fmt"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// BatchedEqualsAlone loads the model at path, decodes each body, runs
// them all in one Run (padded to the longest) and each alone, and checks
// every answer agrees within tensor.F32Accumulated (the same library
// summing in another order). It returns the positions of the shared run
// and of each lone run.
func BatchedEqualsAlone(path string, modelConfig []byte, bodies [][]byte) (shared int, alone []int, err error) {
	ctx := context.Background()
	m := New()
	if err := m.Configure(processors.Spec{Service: "t", Code: Code, ModelSource: path, ModelConfig: modelConfig, CPU: 1}); err != nil {
		return 0, nil, err
	}
	if err := m.Load(ctx, processors.Files{ModelPath: path}); err != nil {
		return 0, nil, err
	}
	defer m.Close()
	var ps []*Payload
	for _, b := range bodies {
		p, err := m.Decode(ctx, &processors.Request{Body: b})
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %v", b, err)
		}
		ps = append(ps, p)
		alone = append(alone, p.longest())
		shared = max(shared, p.longest())
	}
	together, err := m.Run(ctx, ps)
	if err != nil {
		return 0, nil, err
	}
	for i, p := range ps {
		one, err := m.Run(ctx, []*Payload{p})
		if err != nil {
			return 0, nil, err
		}
		for r := range p.rows {
			if err := tensor.CloseValues(fmt.Sprintf("request %d text %d", i, r), together[i].rows[r], one[0].rows[r], tensor.F32Accumulated); err != nil {
				return 0, nil, err
			}
		}
	}
	return shared, alone, nil
}
