package easytransfer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
)

// trainSettings are the preprocessing settings of the training, as
// EasyTransfer's train_config.json keeps them: the app config's attributes
// at the top level (json.dump of its __dict__), and the config it was made
// from under "_config_json" ("preprocess_config", "model_config"). A
// user-written config has "preprocess_config" at the top.
type trainSettings struct {
	seqLen        int
	first, second string
	labels        string
	modelName     string
}

// parseTrainConfig reads the settings from b, the top-level attributes
// first, then _config_json.preprocess_config, then preprocess_config.
func parseTrainConfig(b []byte) (trainSettings, error) {
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		return trainSettings{}, fmt.Errorf("train_config.json is not a JSON object: %v", err)
	}
	scopes := []map[string]any{top}
	if cj, ok := top["_config_json"].(map[string]any); ok {
		if pc, ok := cj["preprocess_config"].(map[string]any); ok {
			scopes = append(scopes, pc)
		}
		if mc, ok := cj["model_config"].(map[string]any); ok {
			scopes = append(scopes, mc)
		}
	}
	if pc, ok := top["preprocess_config"].(map[string]any); ok {
		scopes = append(scopes, pc)
	}
	if mc, ok := top["model_config"].(map[string]any); ok {
		scopes = append(scopes, mc)
	}
	get := func(key string) any {
		for _, s := range scopes {
			if v, ok := s[key]; ok && v != nil {
				return v
			}
		}
		return nil
	}
	var ts trainSettings
	switch v := get("sequence_length").(type) {
	case nil:
	case float64:
		ts.seqLen = int(v)
		if float64(ts.seqLen) != v {
			return ts, fmt.Errorf("train_config.json: sequence_length %v is not an integer", v)
		}
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return ts, fmt.Errorf("train_config.json: sequence_length %q is not an integer", v)
		}
		ts.seqLen = n
	default:
		return ts, fmt.Errorf("train_config.json: sequence_length is a %T, not an integer", v)
	}
	str := func(key string) string {
		if s, ok := get(key).(string); ok {
			return s
		}
		return ""
	}
	ts.first, ts.second = str("first_sequence"), str("second_sequence")
	ts.labels, ts.modelName = str("label_enumerate_values"), str("model_name")
	return ts, nil
}

// labelsFromMapping reads label_mapping.json ({"label": index, ...}, what
// EasyTransfer writes beside train_config.json) into the labels in index
// order.
func labelsFromMapping(b []byte) ([]string, error) {
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("label_mapping.json: %v (want {\"label\": index, ...})", err)
	}
	out := make([]string, len(m))
	for label, i := range m {
		if i < 0 || i >= len(m) || out[i] != "" {
			return nil, fmt.Errorf("label_mapping.json: the indices are not 0 to %d, each once", len(m)-1)
		}
		out[i] = label
	}
	return out, nil
}

// loadPreprocess reads vocab.txt, train_config.json and label_mapping.json
// from the SavedModel's directory or the nearest one above it (within
// model_path), model_config overriding the training's settings.
func (a *App) loadPreprocess(dir, root string) error {
	vocabPath := findBeside(dir, root, "vocab.txt")
	if vocabPath == "" {
		return fmt.Errorf("no vocab.txt in %s or above it within model_path: EasyTransfer tokenizes with the pretrained model's vocab.txt; put it beside saved_model.pb", dir)
	}
	vb, err := readSide(vocabPath)
	if err != nil {
		return err
	}
	vocab, err := tokenizer.ParseVocab(vb)
	if err != nil {
		return fmt.Errorf("%s: %v", vocabPath, err)
	}
	var ts trainSettings
	if p := findBeside(dir, root, "train_config.json"); p != "" {
		b, err := readSide(p)
		if err != nil {
			return err
		}
		if ts, err = parseTrainConfig(b); err != nil {
			return err
		}
	}
	if a.cfg.SequenceLength > 0 {
		ts.seqLen = a.cfg.SequenceLength
	}
	if a.cfg.FirstSequence != "" {
		ts.first = a.cfg.FirstSequence
	}
	if a.cfg.SecondSequence != "" {
		ts.second = a.cfg.SecondSequence
	}
	if a.cfg.LabelEnumerateValues != "" {
		ts.labels = a.cfg.LabelEnumerateValues
	}
	if ts.seqLen == 0 {
		return fmt.Errorf("the sequence length is unknown: no train_config.json with sequence_length in %s or above it; set model_config.sequence_length to the training's", dir)
	}
	if ts.seqLen < 3 || ts.seqLen > maxSequenceLength {
		return fmt.Errorf("sequence_length %d is out of range 3 to %d", ts.seqLen, maxSequenceLength)
	}
	a.seqLen, a.first, a.second = ts.seqLen, ts.first, ts.second
	switch {
	case strings.Contains(ts.labels, ","):
		a.labels = strings.Split(ts.labels, ",")
	case ts.labels == "":
		if p := findBeside(dir, root, "label_mapping.json"); p != "" {
			b, err := readSide(p)
			if err != nil {
				return err
			}
			if a.labels, err = labelsFromMapping(b); err != nil {
				return err
			}
		}
	default:
		// One label, or the name of a labels file EasyTransfer read at
		// training time: neither maps class ids.
	}
	lower := a.cfg.DoLowerCase == nil || *a.cfg.DoLowerCase
	maxChars := a.cfg.MaxInputCharsPerWord
	if maxChars == 0 {
		maxChars = 200
	}
	a.tok, err = tokenizer.NewBert(vocab, tokenizer.BertOptions{LowerCase: lower, MaxInputCharsPerWord: maxChars, PythonLower: true})
	if err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(vocabPath), err)
	}
	if _, err := a.tok.EncodePair(nil, nil, false, a.seqLen, false); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(vocabPath), err)
	}
	return nil
}

// inputNames are the SavedModel inputs EasyTransfer's export receives.
var inputNames = [3]string{"input_ids", "input_mask", "segment_ids"}

// bindSignature checks that the default signature takes EasyTransfer's
// three inputs as integer matrices and notes its outputs.
func (a *App) bindSignature() error {
	md := a.inner.Processor().Metadata()
	have := map[string]processors.IOSpec{}
	var names []string
	for _, in := range md.Inputs {
		have[in.Name] = in
		names = append(names, in.Name)
	}
	for i, n := range inputNames {
		in, ok := have[n]
		if !ok {
			return fmt.Errorf("the SavedModel's default signature takes %s, not %s: it is not an EasyTransfer BERT export (%s)", strings.Join(names, ", "), strings.Join(inputNames[:], ", "), a.cfg.Type)
		}
		if in.DType != "INT32" && in.DType != "INT64" {
			return fmt.Errorf("the SavedModel's input %s is %s; EasyTransfer's exports take int32 (or int64) ids", n, in.DType)
		}
		if len(in.Shape) != 2 {
			return fmt.Errorf("the SavedModel's input %s has shape %v; EasyTransfer's exports take [batch, sequence]", n, in.Shape)
		}
		if s := in.Shape[1]; s > 0 && s != int64(a.seqLen) {
			return fmt.Errorf("the SavedModel's input %s has %d positions, but sequence_length is %d", n, s, a.seqLen)
		}
		a.inputs[i] = in
	}
	if len(md.Inputs) != len(inputNames) {
		return fmt.Errorf("the SavedModel's default signature takes %s; EasyTransfer's exports take exactly %s", strings.Join(names, ", "), strings.Join(inputNames[:], ", "))
	}
	a.outputs = a.outputs[:0]
	for _, o := range md.Outputs {
		a.outputs = append(a.outputs, o.Name)
	}
	sort.Strings(a.outputs)
	if (a.cfg.Type == TextClassify || a.cfg.Type == SequenceLabeling) && !slices.Contains(a.outputs, "predictions") {
		return fmt.Errorf("the SavedModel answers %s but no \"predictions\": EasyTransfer's %s exports do", strings.Join(a.outputs, ", "), a.cfg.Type)
	}
	if a.cfg.Type == SequenceLabeling && len(a.labels) == 0 {
		return fmt.Errorf("sequence_labeling_bert needs the labels: set label_enumerate_values (train_config.json or model_config)")
	}
	return nil
}
