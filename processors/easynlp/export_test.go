package easynlp

import (
	"context"
	"fmt"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// BatchedEqualsAlone loads the app at dir with modelConfig, decodes each
// body, runs them all in one Run (padded to the longest) and each alone
// (padded to its own), and checks every output of every record agrees
// within tensor.F32Accumulated (the same library summing in another
// order). It returns the positions of the shared run and of each lone run.
func BatchedEqualsAlone(dir string, modelConfig []byte, bodies [][]byte) (shared int, alone []int, err error) {
	ctx := context.Background()
	a := New()
	if err := a.Configure(processors.Spec{Service: "t", Code: Code, ModelSource: dir, ModelConfig: modelConfig, CPU: 1}); err != nil {
		return 0, nil, err
	}
	if err := a.Load(ctx, processors.Files{ModelPath: dir}); err != nil {
		return 0, nil, err
	}
	defer a.Close()
	var ps []*Payload
	for _, b := range bodies {
		p, err := a.Decode(ctx, &processors.Request{Body: b})
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %v", b, err)
		}
		ps = append(ps, p)
		alone = append(alone, p.longest())
		shared = max(shared, p.longest())
	}
	together, err := a.Run(ctx, ps)
	if err != nil {
		return 0, nil, err
	}
	for i, p := range ps {
		one, err := a.Run(ctx, []*Payload{p})
		if err != nil {
			return 0, nil, err
		}
		for r := range p.rows {
			for o := range one[0].rows[r] {
				name := fmt.Sprintf("request %d record %d output %d", i, r, o)
				if err := tensor.CloseValues(name, together[i].rows[r][o], one[0].rows[r][o], tensor.F32Accumulated); err != nil {
					return 0, nil, err
				}
			}
		}
	}
	return shared, alone, nil
}

// Answer loads the app at dir (on the CUDA provider when gpu) and answers
// one body.
func Answer(dir string, modelConfig []byte, gpu int, body []byte) ([]byte, error) {
	ctx := context.Background()
	a := New()
	if err := a.Configure(processors.Spec{Service: "t", Code: Code, ModelSource: dir, ModelConfig: modelConfig, CPU: 1, GPU: gpu}); err != nil {
		return nil, err
	}
	if err := a.Load(ctx, processors.Files{ModelPath: dir}); err != nil {
		return nil, err
	}
	defer a.Close()
	p, err := a.Decode(ctx, &processors.Request{Body: body})
	if err != nil {
		return nil, err
	}
	rs, err := a.Run(ctx, []*Payload{p})
	if err != nil {
		return nil, err
	}
	resp, err := a.Encode(ctx, p, rs[0])
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
