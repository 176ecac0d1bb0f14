package tensorflow

import (
	"slices"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/processors"
)

// SignatureJSON is the body EAS answers GET /api/predict/<name> with for a
// TensorFlow service.
type SignatureJSON struct {
	SignatureName string       `json:"signature_name"`
	Inputs        []TensorJSON `json:"inputs"`
	Outputs       []TensorJSON `json:"outputs"`
}

// TensorJSON is one signature tensor in SignatureJSON. Shape is null for an
// unknown rank, -1 marks a dimension of any size.
type TensorJSON struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	Type  string  `json:"type"`
}

func tensorsJSON(ps []tf2onnx.Port) []TensorJSON {
	out := make([]TensorJSON, len(ps))
	for i, p := range ps {
		out[i] = TensorJSON{Name: p.Key, Shape: slices.Clone(p.Shape), Type: tfName(p.DType)}
	}
	return out
}

// MetadataJSON returns the EAS signature JSON of the default signature, the
// exact body EAS gives GET /api/predict/<name>. The server renders it instead
// of Metadata when a processor has this method.
func (m *Model) MetadataJSON() any {
	s := m.sigs[m.defaultSig]
	if s == nil {
		return SignatureJSON{SignatureName: m.defaultSig, Inputs: []TensorJSON{}, Outputs: []TensorJSON{}}
	}
	return SignatureJSON{SignatureName: s.name, Inputs: tensorsJSON(s.inputs), Outputs: tensorsJSON(s.outputs)}
}

// Metadata describes the default signature for KServe metadata; Extra holds
// every served signature in EAS's JSON form and the refused ones with why.
func (m *Model) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: m.code, Inputs: []processors.IOSpec{}, Outputs: []processors.IOSpec{}}
	spec := func(ps []tf2onnx.Port) []processors.IOSpec {
		out := make([]processors.IOSpec, len(ps))
		for i, p := range ps {
			out[i] = processors.IOSpec{Name: p.Key, DType: p.DType.String(), Shape: slices.Clone(p.Shape)}
		}
		return out
	}
	if s := m.sigs[m.defaultSig]; s != nil {
		md.Inputs, md.Outputs = spec(s.inputs), spec(s.outputs)
	}
	sigs := map[string]SignatureJSON{}
	for name, s := range m.sigs {
		sigs[name] = SignatureJSON{SignatureName: name, Inputs: tensorsJSON(s.inputs), Outputs: tensorsJSON(s.outputs)}
	}
	refused := map[string]string{}
	for name, err := range m.refused {
		refused[name] = err.Error()
	}
	md.Extra = map[string]any{
		"platform":       m.Platform(),
		"signature_name": m.defaultSig,
		"signatures":     sigs,
		"source":         m.source,
		"runtime":        m.runtime,
	}
	if len(refused) > 0 {
		md.Extra["refused_signatures"] = refused
	}
	return md
}
