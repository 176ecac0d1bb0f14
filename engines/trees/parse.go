package trees

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxModelBytes bounds a model file: Load refuses a larger file before
// reading it, and the tree processors read no more of one.
const MaxModelBytes = 2 << 30

// Load reads a model file in any supported format; see Parse. It reads
// regular files only (symlinks followed: a device or FIFO could be endless,
// or block) of at most MaxModelBytes.
func Load(path string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("load model: %s is not a regular file", path)
	}
	if st.Size() > MaxModelBytes {
		return nil, fmt.Errorf("load model %s: %d bytes is over the %d byte limit", path, st.Size(), MaxModelBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxModelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("load model %s: it grew past the %d byte limit while being read", path, MaxModelBytes)
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
	return ParseContext(context.Background(), data)
}

// ParseContext is Parse under ctx: it checks ctx between trees (and every
// few thousand lines of LightGBM text) and returns ctx.Err() once ctx is
// done. Decoding the JSON document itself is not interrupted.
func ParseContext(ctx context.Context, data []byte) (*Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := parse(ctx, data)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return m, err
}

func parse(ctx context.Context, data []byte) (*Model, error) {
	wrap := func(format, name string, m *Model, err error) (*Model, error) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m.Format = format
		return m, nil
	}
	switch detect(data) {
	case "xgboost-json":
		m, err := parseXGBoostJSON(ctx, data)
		return wrap("xgboost-json", "xgboost json", m, err)
	case "xgboost-ubjson":
		js, err := ubjsonToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("xgboost ubjson: %w", err)
		}
		m, err := parseXGBoostJSON(ctx, js)
		return wrap("xgboost-ubjson", "xgboost ubjson", m, err)
	case "lightgbm-text":
		m, err := parseLightGBM(ctx, data)
		return wrap("lightgbm-text", "lightgbm", m, err)
	case "lightgbm-json":
		m, err := parseLightGBMJSON(ctx, data)
		return wrap("lightgbm-json", "lightgbm json", m, err)
	case "xgboost-binary":
		m, err := parseXGBoostBinary(ctx, data)
		return wrap("xgboost-binary", "xgboost binary", m, err)
	}
	return nil, errors.New("unknown model format: not XGBoost JSON/UBJSON/binary nor LightGBM text/JSON")
}

// treeCheck returns ctx's error every 256 trees: a model of many trees
// builds for seconds, and a check per tree would cost more than it saves.
func treeCheck(ctx context.Context, i int) error {
	if i%256 != 0 {
		return nil
	}
	return ctx.Err()
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
