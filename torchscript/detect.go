package torchscript

import (
	"archive/zip"
	"errors"
	"io"
	"os"
	"strings"
)

// IsTorchScript reports whether the file at path is a TorchScript archive
// (what torch.jit.save writes), judged by content, not by extension: a zip
// whose entries include <root>/code/..., <root>/data.pkl and
// <root>/constants.pkl under one top-level folder. A plain torch.save
// checkpoint (no code/, no constants.pkl), an ONNX file or any other zip is
// not. Only the zip's central directory is read. A file that cannot be opened
// or read is an error; one that is not a zip is (false, nil).
func IsTorchScript(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, nil
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		if errors.Is(err, zip.ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, zip.ErrAlgorithm) || errors.Is(err, zip.ErrChecksum) {
			return false, nil
		}
		// archive/zip reports other malformed archives with plain errors;
		// only I/O failures should surface, and those come from f.
		if _, serr := f.Stat(); serr != nil {
			return false, serr
		}
		return false, nil
	}
	type parts struct{ code, data, constants bool }
	roots := map[string]*parts{}
	for _, e := range zr.File {
		root, rest, ok := strings.Cut(e.Name, "/")
		if !ok || root == "" {
			continue
		}
		p := roots[root]
		if p == nil {
			p = &parts{}
			roots[root] = p
		}
		switch {
		case strings.HasPrefix(rest, "code/"):
			p.code = true
		case rest == "data.pkl":
			p.data = true
		case rest == "constants.pkl":
			p.constants = true
		}
		if p.code && p.data && p.constants {
			return true, nil
		}
	}
	return false, nil
}
