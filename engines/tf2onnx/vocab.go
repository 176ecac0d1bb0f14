package tf2onnx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// maxVocabBytes bounds a vocabulary file read into a LabelEncoder.
const maxVocabBytes = 64 << 20

// TextFileInitializer's special column indexes.
const (
	wholeLine  = -2
	lineNumber = -1
)

// readVocabulary reads the keys and values InitializeTableFromTextFileV2
// fills table with from its asset file, the way TensorFlow's
// TextFileLineIterator does: one entry per line (\n or \r\n), the key and
// the value each the whole line (-2), the line number plus offset (-1) or
// a column split by delimiter, vocab_size lines when set.
func (c *converter) readVocabulary(table, init *node) (keys, vals tensor.Tensor, err error) {
	if table == nil {
		return keys, vals, errors.New("no table node")
	}
	kt, vt := table.dtype("key_dtype", tensor.Invalid), table.dtype("value_dtype", tensor.Invalid)
	path, err := c.assetPath(init.inputs[1])
	if err != nil {
		return keys, vals, err
	}
	f, err := os.Open(path)
	if err != nil {
		return keys, vals, fmt.Errorf("vocabulary file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxVocabBytes+1))
	if err != nil {
		return keys, vals, fmt.Errorf("vocabulary file: %w", err)
	}
	if len(data) > maxVocabBytes {
		return keys, vals, fmt.Errorf("vocabulary file %s is larger than %d bytes", filepath.Base(path), maxVocabBytes)
	}
	keys, vals, err = parseVocabulary(data, kt, vt, vocabSpec{
		size: init.i("vocab_size", -1), delim: init.s("delimiter", "\t"), offset: init.i("offset", 0),
		key: init.i("key_index", wholeLine), value: init.i("value_index", lineNumber),
	})
	if err != nil {
		return keys, vals, fmt.Errorf("vocabulary file %s %w", filepath.Base(path), err)
	}
	return keys, vals, nil
}

// vocabSpec is how InitializeTableFromTextFileV2 reads its file.
type vocabSpec struct {
	size       int64 // lines read; -1 = all
	delim      string
	offset     int64 // added to line numbers
	key, value int64 // column indexes, or wholeLine, lineNumber
}

// parseVocabulary reads a vocabulary file's keys and values.
func parseVocabulary(data []byte, kt, vt tensor.DType, spec vocabSpec) (keys, vals tensor.Tensor, err error) {
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if spec.size >= 0 {
		if int64(len(lines)) < spec.size {
			return keys, vals, fmt.Errorf("has %d lines, vocab_size is %d", len(lines), spec.size)
		}
		lines = lines[:spec.size]
	}
	keys = tensor.Tensor{DType: kt, Shape: []int64{int64(len(lines))}}
	vals = tensor.Tensor{DType: vt, Shape: []int64{int64(len(lines))}}
	for i, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return keys, vals, fmt.Errorf("has an empty line (%d), which is not translated", i+1)
		}
		var cols []string
		if spec.delim != "" {
			cols = strings.Split(line, spec.delim)
		} else {
			cols = []string{line}
		}
		if err := appendField(&keys, line, cols, spec.key, int64(i)+spec.offset); err != nil {
			return keys, vals, fmt.Errorf("line %d: %w", i+1, err)
		}
		if err := appendField(&vals, line, cols, spec.value, int64(i)+spec.offset); err != nil {
			return keys, vals, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	return keys, vals, nil
}

// appendField appends column index of a vocabulary line to t.
func appendField(t *tensor.Tensor, line string, cols []string, index, lineNo int64) error {
	var field string
	switch {
	case index == wholeLine:
		field = line
	case index == lineNumber:
		if t.DType != tensor.Int64 {
			return fmt.Errorf("line numbers go into int64, not %s", t.DType)
		}
		t.Data = append(t.Data, tensor.FromInt64("", []int64{1}, []int64{lineNo}).Data...)
		return nil
	case index >= 0 && index < int64(len(cols)):
		field = cols[index]
	default:
		return fmt.Errorf("no column %d", index)
	}
	switch t.DType {
	case tensor.String:
		t.Strings = append(t.Strings, []byte(field))
	case tensor.Int64:
		v, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
		if err != nil {
			return err
		}
		t.Data = append(t.Data, tensor.FromInt64("", []int64{1}, []int64{v}).Data...)
	case tensor.Float32:
		v, err := strconv.ParseFloat(strings.TrimSpace(field), 32)
		if err != nil {
			return err
		}
		t.Data = append(t.Data, tensor.FromFloat32("", []int64{1}, []float32{float32(v)}).Data...)
	default:
		return fmt.Errorf("%s entries are not supported", t.DType)
	}
	return nil
}

// assetPath follows a table initializer's filename input to the asset
// file the SavedModel loader feeds it: a tensor named in the MetaGraph's
// asset_file_def (TF1's constant, TF2's asset_path_initializer
// placeholder), possibly through a resource variable it was assigned to.
func (c *converter) assetPath(r ref) (string, error) {
	if c.model == nil || c.model.MetaGraph == nil || c.model.Dir == "" {
		return "", errors.New("the vocabulary file is not at hand")
	}
	assets := map[string]string{}
	for _, a := range c.model.MetaGraph.AssetFileDef {
		name, _, _ := savedmodel.SplitInput(a.GetTensorInfo().GetName())
		assets[name] = a.GetFilename()
	}
	for hops := 0; hops < 64; hops++ {
		rr, err := c.g.resolve(r)
		if err != nil {
			return "", err
		}
		if file, ok := assets[rr.node]; ok {
			if file == "" || file != filepath.Base(file) || file == ".." || bytes.ContainsAny([]byte(file), `/\`) {
				return "", fmt.Errorf("asset file name %q is not a plain file name", file)
			}
			return filepath.Join(c.model.Dir, "assets", file), nil
		}
		d := c.g.nodes[rr.node]
		switch {
		case (d.op == "Identity" || d.op == "StopGradient") && len(d.inputs) == 1:
			r = d.inputs[0]
		case d.op == "ReadVariableOp" && len(d.inputs) == 1:
			v, err := c.g.resolve(d.inputs[0])
			if err != nil {
				return "", err
			}
			var src *ref
			for _, a := range c.g.nodes {
				if a.op != "AssignVariableOp" || len(a.inputs) != 2 {
					continue
				}
				if av, err := c.g.resolve(a.inputs[0]); err == nil && av == v {
					if src != nil {
						return "", fmt.Errorf("variable %q holding the file name is assigned twice", v.node)
					}
					in := a.inputs[1]
					src = &in
				}
			}
			if src == nil {
				return "", fmt.Errorf("variable %q holding the file name is never assigned", v.node)
			}
			r = *src
		default:
			return "", fmt.Errorf("the file name comes from %q (%s), not from an asset of the SavedModel", d.name, d.op)
		}
	}
	return "", errors.New("the file name is too far from its asset")
}
