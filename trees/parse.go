package trees

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// MaxModelBytes bounds a model file: larger files are refused before reading.
const MaxModelBytes = 2 << 30

// Load reads a model file in any supported format; see Parse.
func Load(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if st.Size() > MaxModelBytes {
		return nil, fmt.Errorf("load model %s: %d bytes is over the %d byte limit", path, st.Size(), MaxModelBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, nil
}

// Parse reads a model from its bytes, recognising the format from them:
// XGBoost JSON ({"learner": ...}), XGBoost UBJSON ({L...learner), the
// XGBoost legacy binary format, LightGBM text ("tree\nversion=...") and
// LightGBM's JSON dump ({"name": "tree", ...}).
func Parse(data []byte) (*Model, error) {
	switch detect(data) {
	case "xgboost-json":
		return ParseXGBoostJSON(data)
	case "xgboost-ubjson":
		return ParseXGBoostUBJSON(data)
	case "lightgbm-text":
		return ParseLightGBM(data)
	case "lightgbm-json":
		return ParseLightGBMJSON(data)
	case "xgboost-binary":
		return ParseXGBoostBinary(data)
	}
	return nil, errors.New("unknown model format: not XGBoost JSON/UBJSON/binary nor LightGBM text/JSON")
}

// detect names the format of data, or "" when it is none of ours.
func detect(data []byte) string {
	d := bytes.TrimLeft(data, " \t\r\n\xef\xbb\xbf")
	switch {
	case len(d) == 0:
		return ""
	case bytes.HasPrefix(d, []byte("tree\n")) || bytes.HasPrefix(d, []byte("tree\r\n")):
		return "lightgbm-text"
	case d[0] == '{' && len(d) > 1 && bytes.ContainsAny(d[1:2], "iUIlL$#}"):
		return "xgboost-ubjson"
	case d[0] == '{':
		head := d[:min(len(d), 4096)]
		if bytes.Contains(head, []byte(`"learner"`)) {
			return "xgboost-json"
		}
		if bytes.Contains(head, []byte(`"tree_info"`)) || bytes.Contains(head, []byte(`"num_tree_per_iteration"`)) {
			return "lightgbm-json"
		}
		return "xgboost-json"
	}
	return "xgboost-binary"
}
