package torchscript

import (
	"archive/zip"
	"errors"
	"io"
	"os"
	"strconv"
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

// FileFormatVersion reads the TorchScript format version a file records in
// its <root>/version (or <root>/.data/version) entry: what torch.jit.save
// wrote, compared with the newest the runtime reads to explain a failed load.
// ok is false when the file has no readable version entry.
func FileFormatVersion(path string) (v int, ok bool) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return 0, false
	}
	defer zr.Close()
	for _, e := range zr.File {
		_, rest, found := strings.Cut(e.Name, "/")
		if !found || (rest != "version" && rest != ".data/version") || e.UncompressedSize64 > 32 {
			continue
		}
		rc, err := e.Open()
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(rc, 32))
		rc.Close()
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 {
			return n, true
		}
	}
	return 0, false
}
