// Package savedmodel reads TensorFlow SavedModels in pure Go: saved_model.pb
// (through the generated TensorFlow protos of github.com/wamuir/graft), the
// MetaGraph tagged "serve" with its signatures, and the variables' tensor
// bundle (a LevelDB-format index and data shards).
//
// It exists so that TensorFlow models can be served without libtensorflow,
// which cannot be installed on our hosts: package tf2onnx translates what
// this package reads into ONNX. Variables are resolved to checkpoint keys the
// way TensorFlow's own loader finds them: through the restore ops of the
// saver (TF1 graphs, VariableV2 and VarHandleOp), or through the object graph
// of TF2 exports.
package savedmodel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// ServeTag is the MetaGraph tag a serving load looks for.
const ServeTag = "serve"

// maxModelBytes bounds saved_model.pb: protobuf itself cannot exceed 2 GiB.
const maxModelBytes = 2 << 30

// Model is a loaded SavedModel: the serving MetaGraph and its variables.
type Model struct {
	// Dir is the SavedModel directory (the one holding saved_model.pb).
	Dir string
	// MetaGraph is the MetaGraph tagged "serve" (or the only one).
	MetaGraph *corepb.MetaGraphDef
	// Variables is the variables bundle; nil when the model has none.
	Variables *Bundle
}

// FindDir resolves path to the directory holding saved_model.pb: path itself,
// or, for a model base directory as TF Serving lays it out, the numeric
// version subdirectory with the highest number. A directory holding nothing
// but one subdirectory (an extracted archive's top folder) is looked into,
// a few levels deep.
func FindDir(path string) (string, error) {
	for range 3 {
		ents, err := os.ReadDir(path)
		if err != nil || len(ents) != 1 || !ents[0].IsDir() {
			break
		}
		path = filepath.Join(path, ents[0].Name())
	}
	return findDir(path)
}

func findDir(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	if !st.IsDir() {
		if filepath.Base(path) == "saved_model.pb" {
			return filepath.Dir(path), nil
		}
		return "", fmt.Errorf("model_path: %s is a file; point it at the SavedModel directory (the one holding saved_model.pb)", path)
	}
	if exists(filepath.Join(path, "saved_model.pb")) {
		return path, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	best, bestN := "", int64(-1)
	var others []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n, err := strconv.ParseInt(e.Name(), 10, 64)
		sub := filepath.Join(path, e.Name())
		if !exists(filepath.Join(sub, "saved_model.pb")) {
			continue
		}
		if err != nil {
			others = append(others, e.Name())
			continue
		}
		if n > bestN {
			best, bestN = sub, n
		}
	}
	switch {
	case best != "":
		return best, nil
	case len(others) == 1:
		return filepath.Join(path, others[0]), nil
	case len(others) > 1:
		return "", fmt.Errorf("model_path: %s holds several SavedModels (%s); point model_path at one of them", path, strings.Join(others, ", "))
	}
	if exists(filepath.Join(path, "saved_model.pbtxt")) {
		return "", fmt.Errorf("model_path: %s holds saved_model.pbtxt; only the binary saved_model.pb is read: re-save with tf.saved_model.save", path)
	}
	return "", fmt.Errorf("model_path: no saved_model.pb in %s or in a version subdirectory of it", path)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Load reads the SavedModel at path (see FindDir) and opens its variables.
func Load(path string) (*Model, error) {
	dir, err := FindDir(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, "saved_model.pb"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxModelBytes))
	if err != nil {
		return nil, fmt.Errorf("saved_model.pb: %w", err)
	}
	mg, err := ParseMetaGraph(data, ServeTag)
	if err != nil {
		return nil, err
	}
	m := &Model{Dir: dir, MetaGraph: mg}
	prefix := filepath.Join(dir, "variables", "variables")
	if exists(prefix + ".index") {
		if m.Variables, err = OpenBundle(prefix); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ParseMetaGraph parses saved_model.pb bytes and returns the MetaGraph
// carrying tag, or the only MetaGraph when there is one.
func ParseMetaGraph(data []byte, tag string) (*corepb.MetaGraphDef, error) {
	var sm corepb.SavedModel
	if err := proto.Unmarshal(data, &sm); err != nil {
		return nil, fmt.Errorf("saved_model.pb is not a SavedModel protobuf: %w", err)
	}
	if len(sm.MetaGraphs) == 0 {
		return nil, errors.New("saved_model.pb holds no MetaGraph")
	}
	var tagSets []string
	for _, mg := range sm.MetaGraphs {
		tags := mg.GetMetaInfoDef().GetTags()
		if slices.Contains(tags, tag) {
			return checkMetaGraph(mg)
		}
		tagSets = append(tagSets, "["+strings.Join(tags, ",")+"]")
	}
	if len(sm.MetaGraphs) == 1 {
		return checkMetaGraph(sm.MetaGraphs[0])
	}
	return nil, fmt.Errorf("saved_model.pb has no MetaGraph tagged %q (tag sets: %s); re-export with tags=[%q]", tag, strings.Join(tagSets, " "), tag)
}

func checkMetaGraph(mg *corepb.MetaGraphDef) (*corepb.MetaGraphDef, error) {
	if mg.GraphDef == nil {
		return nil, errors.New("saved_model.pb: the serving MetaGraph has no graph")
	}
	if len(mg.SignatureDef) == 0 {
		return nil, errors.New("saved_model.pb: the serving MetaGraph has no signatures; export with a serving signature (signatures= in tf.saved_model.save)")
	}
	return mg, nil
}

// SignatureNames returns the signature keys in order, leaving out TF's
// internal __saved_model_init_op entry.
func (m *Model) SignatureNames() []string {
	var names []string
	for k := range m.MetaGraph.SignatureDef {
		if k == "__saved_model_init_op" {
			continue
		}
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
