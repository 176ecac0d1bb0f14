package wire

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWireImportsOnlyLeaves keeps the data flow one-way: the codecs may use
// the tensor and bad-input leaves and each other, never the processors, the
// scheduler or the server that sit above them.
func TestWireImportsOnlyLeaves(t *testing.T) {
	const module = "github.com/eas-server/eas-server/"
	allowed := []string{module + "wire", module + "tensor", module + "internal/badinput"}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || p == a || strings.HasPrefix(p, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s; wire may import only %v", path, p, allowed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
