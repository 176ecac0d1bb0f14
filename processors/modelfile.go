package processors

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FindModelFile resolves model_path and model_entry to the one file a
// processor loads: model_path itself when it is a file; else model_entry
// inside the directory; else the only file below it whose extension is in
// exts (lowercase, with the dot). kind names the files in messages, e.g.
// "PMML".
func FindModelFile(path, entry string, exts []string, kind string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	if !st.IsDir() {
		return path, nil
	}
	if entry != "" {
		f := filepath.Join(path, filepath.Clean("/"+entry)) // never above path
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			return "", fmt.Errorf("model_entry: %q not found in %s (it must name a file)", entry, path)
		}
		return f, nil
	}
	var found []string
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			ext := strings.ToLower(filepath.Ext(p))
			for _, e := range exts {
				if ext == e {
					found = append(found, p)
					break
				}
			}
		}
		return nil
	})
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("model_path: no %s file (%s) in %s; put the model there or point model_path at the file", kind, strings.Join(exts, ", "), path)
	case 1:
		return found[0], nil
	}
	names := found
	if len(names) > 5 {
		names = append(names[:5:5], fmt.Sprintf("and %d more", len(found)-5))
	}
	return "", fmt.Errorf("model_path: %d %s files in %s (%s); set model_entry to the one to serve", len(found), kind, path, strings.Join(names, ", "))
}
