// Package sniff tells what a model file is by its content, so that a
// processor whose parser fails on a file can say what the file really is
// and which code serves it, instead of its parser's error.
//
// It lives apart from package processors, the contract every processor
// implements, because recognising a TorchScript archive takes the
// torchscript package: the contract, which outside Go code imports to
// write a processor, stays free of any engine. It is safe for concurrent
// use; nothing here holds state.
package sniff

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/processors"
)

// Format is a model file format recognised by its content, so that a
// processor whose parser fails on a file can say what the file really is
// and which code serves it, instead of its parser's error ("malformed XML
// ... U+0008" for an ONNX file given to pmml).
type Format struct {
	Family string // onnx, torchscript, pmml, trees, tensorflow, caffe, ... (what a processor accepts)
	Name   string // for messages, with its article: "an ONNX model"
	// Codes are the processor codes that serve this format, best first;
	// only the registered ones are offered.
	Codes []string
	// Note says how to serve the format when no code does, or adds to
	// the codes (how to export it); "" for none.
	Note string
}

// Formats by family. The codes are the ones a user should pick; a GPU
// twin is left to the code's own device rule.
var (
	fmtONNX        = Format{Family: "onnx", Name: "an ONNX model", Codes: []string{"onnx_cpu", "pytorch_cpu_1.10"}}
	fmtTorchScript = Format{Family: "torchscript", Name: "a TorchScript archive", Codes: []string{"pytorch_cpu_1.10"}}
	fmtPMML        = Format{Family: "pmml", Name: "a PMML model", Codes: []string{"pmml"}}
	fmtSavedModel  = Format{Family: "tensorflow", Name: "a TensorFlow SavedModel", Codes: []string{"tensorflow_cpu_2.7", "tensorflow_cpu_1.15"},
		Note: "any tensorflow_cpu_* code serves it (the version is EAS's image)"}
	treeCodes = []string{"parameter_server", "xgboost"}
	fmtCaffe  = Format{Family: "caffe", Name: "a Caffe model", Codes: []string{"caffe_cpu"},
		Note: "a Caffe model is two files, deploy.prototxt and its .caffemodel: put both in an archive (.zip, .tar.gz) or folder and point model_path at it"}
)

// sniffHead is how much of a file File reads: enough for every magic
// number and text header it looks for.
const sniffHead = 64 << 10

// File recognises the format of the model at path (a file, or a
// directory for a TensorFlow SavedModel) by its content. ok is false when
// the format is none it knows (the caller's parser error then stands).
// It reads at most 64 KiB and, for a zip, its central directory.
func File(path string) (f Format, ok bool) {
	st, err := os.Stat(path)
	if err != nil {
		return Format{}, false
	}
	if st.IsDir() {
		for _, n := range []string{"saved_model.pb", "saved_model.pbtxt"} {
			if _, err := os.Stat(filepath.Join(path, n)); err == nil {
				return fmtSavedModel, true
			}
		}
		return Format{}, false
	}
	if !st.Mode().IsRegular() {
		return Format{}, false
	}
	fh, err := os.Open(path)
	if err != nil {
		return Format{}, false
	}
	defer fh.Close()
	head, err := io.ReadAll(io.LimitReader(fh, sniffHead))
	if err != nil || len(head) == 0 {
		return Format{}, false
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return sniffZip(path)
	}
	if strings.EqualFold(filepath.Base(path), "saved_model.pb") {
		return fmtSavedModel, true
	}
	for _, s := range []func([]byte) (Format, bool){sniffMagic, sniffText, sniffBinaryTrees, sniffONNX, sniffCaffeModel} {
		if f, ok := s(head); ok {
			return f, true
		}
	}
	return Format{}, false
}

// sniffZip tells a TorchScript archive (torchscript.IsTorchScript) from a
// torch.save checkpoint and any other zip.
func sniffZip(path string) (Format, bool) {
	if ts, err := torchscript.IsTorchScript(path); err == nil && ts {
		return fmtTorchScript, true
	}
	if zr, err := zip.OpenReader(path); err == nil {
		defer zr.Close()
		for _, e := range zr.File {
			if strings.HasSuffix(e.Name, "/data.pkl") || e.Name == "data.pkl" {
				return Format{Family: "pytorch-checkpoint", Name: "a PyTorch checkpoint (torch.save)",
					Note: "it holds weights without code: save the model with torch.jit.save (pytorch_cpu_1.10) or export it with torch.onnx.export (onnx_cpu)"}, true
			}
		}
	}
	return Format{Family: "archive", Name: "a zip archive",
		Note: "point model_path at the model file itself, or at a directory holding it (set model_entry when it holds several)"}, true
}

// sniffMagic recognises formats that start with a fixed signature.
func sniffMagic(h []byte) (Format, bool) {
	switch {
	case bytes.HasPrefix(h, []byte("\x1f\x8b")):
		return Format{Family: "archive", Name: "a gzip-compressed file (a .tar.gz?)",
			Note: "point model_path at the model file itself, or at a directory holding it"}, true
	case len(h) > 262 && string(h[257:262]) == "ustar":
		return Format{Family: "archive", Name: "a tar archive",
			Note: "point model_path at the model file itself, or at a directory holding it"}, true
	case bytes.HasPrefix(h, []byte("\x89HDF\r\n\x1a\n")):
		return Format{Family: "keras", Name: "an HDF5 file (a Keras .h5 model?)",
			Note: "save the Keras model as a TensorFlow SavedModel and deploy it with tensorflow_cpu_2.7, or export it to ONNX (tf2onnx) for onnx_cpu"}, true
	case len(h) > 2 && h[0] == 0x80 && h[1] >= 2 && h[1] <= 5:
		return Format{Family: "pickle", Name: "a Python pickle (an old torch.save, or a joblib/pickle dump)",
			Note: "export the model to ONNX (torch.onnx.export, skl2onnx) for onnx_cpu, or a scikit-learn model to PMML (sklearn2pmml) for pmml"}, true
	case bytes.HasPrefix(h, []byte("binf")):
		return Format{Family: "trees", Name: "an XGBoost binary model", Codes: treeCodes}, true
	case len(h) > 10 && h[0] == '{' && (h[1] == 'L' || h[1] == 'i' || h[1] == 'U' || h[1] == 'I' || h[1] == 'l') &&
		bytes.Contains(h[:min(len(h), 64)], []byte("learner")):
		return Format{Family: "trees", Name: "an XGBoost UBJSON model", Codes: treeCodes}, true
	case len(h) > 10 && binary.LittleEndian.Uint64(h) < 100<<20 && bytes.HasPrefix(h[8:], []byte(`{"`)):
		return Format{Family: "safetensors", Name: "a safetensors file",
			Note: "it holds weights without a graph: export the model to ONNX (onnx_cpu) or TorchScript (pytorch_cpu_1.10)"}, true
	}
	return Format{}, false
}

// sniffText recognises the text formats: XML (PMML or not), the JSON
// dumps of XGBoost and LightGBM, LightGBM's text model and Caffe prototxt.
func sniffText(h []byte) (Format, bool) {
	t := bytes.TrimLeft(bytes.TrimPrefix(h, []byte("\xef\xbb\xbf")), " \t\r\n")
	if bytes.IndexByte(t[:min(len(t), 512)], 0) >= 0 {
		return Format{}, false // binary
	}
	switch {
	case bytes.HasPrefix(t, []byte("<")):
		if bytes.Contains(t, []byte("<PMML")) {
			return fmtPMML, true
		}
		return Format{Family: "xml", Name: "an XML document that is not PMML (no <PMML> element)"}, true
	case bytes.HasPrefix(t, []byte("{")):
		switch {
		case bytes.Contains(t, []byte(`"learner"`)) && bytes.Contains(t, []byte(`"gradient_booster"`)):
			return Format{Family: "trees", Name: "an XGBoost JSON model", Codes: treeCodes}, true
		case bytes.Contains(t, []byte(`"tree_info"`)) || (bytes.Contains(t, []byte(`"name":"tree"`)) || bytes.Contains(t, []byte(`"name": "tree"`))) && bytes.Contains(t, []byte(`"feature_names"`)):
			return Format{Family: "trees", Name: "a LightGBM JSON model", Codes: treeCodes}, true
		}
	case bytes.HasPrefix(t, []byte("tree\n")) || bytes.HasPrefix(t, []byte("tree\r\n")):
		return Format{Family: "trees", Name: "a LightGBM text model", Codes: treeCodes}, true
	case (bytes.Contains(t, []byte("layer {")) || bytes.Contains(t, []byte("layers {"))) && bytes.Contains(t, []byte("type:")):
		f := fmtCaffe
		f.Name = "a Caffe prototxt"
		return f, true
	}
	return Format{}, false
}

// sniffBinaryTrees recognises XGBoost's legacy binary (before "binf"):
// its header names the booster within the first bytes.
func sniffBinaryTrees(h []byte) (Format, bool) {
	head := h[:min(len(h), 256)]
	if bytes.IndexByte(head, 0) >= 0 && (bytes.Contains(head, []byte("gbtree")) || bytes.Contains(head, []byte("gblinear"))) {
		return Format{Family: "trees", Name: "an XGBoost binary model", Codes: treeCodes}, true
	}
	return Format{}, false
}

// sniffONNX recognises an ONNX ModelProto by its protobuf fields: it opens
// with ir_version (field 1, a varint of 3..15: 1 and 2 predate every
// exporter in use, and TensorFlow's SavedModel opens with schema version
// 1), and the fields that follow are ModelProto's with their wire types.
func sniffONNX(h []byte) (Format, bool) {
	if len(h) < 4 || h[0] != 0x08 || h[1] < 3 || h[1] > 15 {
		return Format{}, false
	}
	wire := map[uint64]uint64{1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2}
	pos, fields := 0, 0
	for pos < len(h) && fields < 8 {
		key, n := binary.Uvarint(h[pos:])
		if n <= 0 {
			break
		}
		want, known := wire[key>>3]
		if !known || key&7 != want {
			return Format{}, false
		}
		pos += n
		v, n := binary.Uvarint(h[pos:])
		if n <= 0 {
			break
		}
		pos += n
		if key&7 == 2 {
			pos += int(min(v, uint64(len(h))))
		}
		fields++
	}
	if fields < 2 {
		return Format{}, false
	}
	return fmtONNX, true
}

// sniffCaffeModel recognises a binary Caffe NetParameter: a name (field 1)
// followed by layers (field 100, or the old field 2 with V1 layers).
func sniffCaffeModel(h []byte) (Format, bool) {
	if len(h) < 4 || h[0] != 0x0a || int(h[1])+4 > len(h) {
		return Format{}, false
	}
	name := h[2 : 2+int(h[1])]
	rest := h[2+int(h[1]):]
	if !utf8.Valid(name) || bytes.IndexFunc(name, func(r rune) bool { return r < 0x20 }) >= 0 {
		return Format{}, false
	}
	if bytes.HasPrefix(rest, []byte{0xa2, 0x06}) {
		return fmtCaffe, true
	}
	return Format{}, false
}

// WrongFormat explains why a processor that reads family (its Format's
// Family, e.g. "pmml") could not read path: when the content is another
// format this package recognises, the error says which and how to deploy
// it ("model_path: m.onnx is an ONNX model, not PMML: deploy it with
// processor onnx_cpu or pytorch_cpu_1.10"). It returns nil when the file
// is of the processor's own family or of no known format, so that the
// parser's own error stands. what names the processor's format in the
// message ("PMML").
func WrongFormat(path, family, what string) error {
	f, ok := File(path)
	if !ok || f.Family == family {
		return nil
	}
	var how []string
	if codes := registered(f.Codes); len(codes) > 0 {
		how = append(how, "deploy it with processor "+strings.Join(codes, " or "))
	}
	if f.Note != "" {
		how = append(how, f.Note)
	}
	msg := fmt.Sprintf("model_path: %s is %s, not %s", filepath.Base(path), f.Name, what)
	if len(how) > 0 {
		msg += ": " + strings.Join(how, "; ")
	}
	return fmt.Errorf("%s", msg)
}

// registered keeps the codes this build serves (those in the processors
// registry).
func registered(codes []string) []string {
	var out []string
	for _, c := range codes {
		if _, ok := processors.Lookup(c); ok {
			out = append(out, c)
		}
	}
	return out
}
