package processors

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/internal/humanize"
)

// ModelFile says which file under model_path a processor loads. Every
// processor finds its model file with Find, so model_path and model_entry
// mean the same for every code.
type ModelFile struct {
	Kind string   // names the files in messages, e.g. "PMML" or ".onnx"
	Exts []string // extensions of model files, lowercase with the dot
	// MaxDepth bounds how many directory levels below model_path are
	// searched; 0 means any depth. Hidden directories are never searched.
	MaxDepth int
	// Optional makes a model_path without such a file answer "" instead of
	// an error (a TensorFlow directory without a tf2onnx export holds a
	// SavedModel to translate).
	Optional bool
	// Hint, when set, explains a directory with no model file from the
	// other files found there (relative paths); "" for no hint.
	Hint func(files []string) string
}

// Find resolves model_path (a local file or directory) and model_entry to
// the one model file: model_path itself when it is a file; else model_entry
// inside the directory (never above it); else the only file below it with
// one of Exts. The file it answers is a regular file (symlinks followed):
// a device, FIFO or socket is refused with an error wrapping ErrNotRegular
// ("model_path: /dev/zero is not a regular file ..."), never opened.
func (f ModelFile) Find(path, entry string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("model_path: %w", notRegular(path, st.Mode()))
		}
		if f.Optional && !f.matches(path) {
			return "", nil
		}
		return path, nil
	}
	if entry != "" {
		p := filepath.Join(path, filepath.Clean("/"+entry))
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			return "", fmt.Errorf("model_entry: %q not found in %s (it must name a file)", entry, path)
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("model_entry: %w", notRegular(p, st.Mode()))
		}
		return p, nil
	}
	var found, others []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		if d.IsDir() {
			depth := strings.Count(rel, string(filepath.Separator)) + 1
			if p != path && (strings.HasPrefix(d.Name(), ".") || (f.MaxDepth > 0 && depth > f.MaxDepth)) {
				return filepath.SkipDir
			}
			return nil
		}
		if f.matches(p) {
			found = append(found, rel)
		} else {
			others = append(others, rel)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	sort.Strings(found)
	switch len(found) {
	case 1:
		p := filepath.Join(path, found[0])
		if st, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("model_path: %w", err)
		} else if !st.Mode().IsRegular() {
			return "", fmt.Errorf("model_path: %w", notRegular(p, st.Mode()))
		}
		return p, nil
	case 0:
		if f.Optional {
			return "", nil
		}
		msg := fmt.Sprintf("model_path: no %s file (%s) in %s; put the model there or point model_path at the file", f.Kind, strings.Join(f.Exts, ", "), path)
		if f.Hint != nil {
			if h := f.Hint(others); h != "" {
				msg = fmt.Sprintf("model_path: no %s file in %s; %s", f.Kind, path, h)
			}
		}
		return "", fmt.Errorf("%s", msg)
	}
	return "", fmt.Errorf("model_path: %d %s files in %s (%s); set model_entry to the one to serve", len(found), f.Kind, path, strings.Join(humanize.FirstN(found, 5), ", "))
}

func (f ModelFile) matches(p string) bool {
	ext := strings.ToLower(filepath.Ext(p))
	for _, e := range f.Exts {
		if ext == e {
			return true
		}
	}
	return false
}
