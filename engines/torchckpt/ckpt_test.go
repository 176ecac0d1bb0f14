package torchckpt

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// TestAgainstTorch has PyTorch write a state_dict with views (a transposed
// tensor, a slice at an offset of a shared storage), float16, bfloat16,
// an int64 buffer and a Parameter, and a safetensors file of the same, and
// checks every float tensor reads back exactly.
func TestAgainstTorch(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "testdata/gen_ckpt.py", dir).CombinedOutput(); err != nil {
		require.Missing(t, require.Python, "testdata/gen_ckpt.py needs Debian's python3-torch on /usr/bin/python3 (scripts/install-test-deps.sh): %v\n%s", err, out)
	}
	var want map[string]struct {
		Shape []int64
		Data  []float32
	}
	b, err := os.ReadFile(filepath.Join(dir, "want.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	read := func(name string, f func([]byte) (*StateDict, error)) *StateDict {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sd, err := f(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return sd
	}
	all := map[string]*Tensor{}
	for _, name := range []string{"model.bin", "param.bin"} {
		for k, v := range read(name, ReadTorch).Tensors {
			all[k] = v
		}
	}
	st := read("model.safetensors", ReadSafetensors)
	for k, w := range want {
		for i, src := range []map[string]*Tensor{all, st.Tensors} {
			g := src[k]
			if g == nil {
				if i == 1 && k == "w" {
					continue
				}
				t.Errorf("%s: missing", k)
				continue
			}
			if err := tensor.Close(tensor.FromFloat32(k, g.Shape, g.F32), tensor.FromFloat32(k, w.Shape, w.Data), tensor.Exact); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
	}
	if p := all["backbone.embeddings.position_ids"]; p == nil || p.DType != "int64" || p.F32 != nil {
		t.Errorf("position_ids: %+v, want an int64 tensor listed without values", p)
	}
	if got := read("model.bin", ReadTorch).Keys; got[0] != "backbone.embeddings.word_embeddings.weight" || len(got) != 8 {
		t.Errorf("keys %v, want the file's order", got)
	}
}

// TestRefusesCode checks that a pickle naming anything but a state_dict's
// globals is refused before anything is built from it.
func TestRefusesCode(t *testing.T) {
	for _, tc := range []struct{ pkl, want string }{
		{"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.", "os.system, which a state_dict does not need"},
		{"\x80\x02cbuiltins\neval\n.", "builtins.eval"},
		{"\x80\x02ctorch\n_load_from_bytes\n.", "torch._load_from_bytes"},
		{"\x80\x02]q\x00.", "holds a list, not a state_dict"},
		{"\x80\x02}q\x00X\x01\x00\x00\x00aK\x01s.", `"a" is a int, not a tensor`},
		{"\x80\x02}(", "ends early"},
	} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, _ := zw.Create("archive/data.pkl")
		w.Write([]byte(tc.pkl))
		zw.Close()
		_, err := ReadTorch(buf.Bytes())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.pkl, err, tc.want)
		}
	}
	if _, err := ReadTorch([]byte("\x80\x02}.")); err == nil || !strings.Contains(err.Error(), "legacy format") {
		t.Errorf("legacy: %v", err)
	}
}

// FuzzReadTorch: any bytes give a state_dict or an error, never a panic or
// an allocation beyond the file's bounds.
func FuzzReadTorch(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed.pt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	// The pickle alone, zipped, so mutations reach the unpickler.
	zr, _ := zip.NewReader(bytes.NewReader(seed), int64(len(seed)))
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, "data.pkl") {
			rc, _ := zf.Open()
			pkl := new(bytes.Buffer)
			pkl.ReadFrom(rc)
			rc.Close()
			f.Add(pkl.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !bytes.HasPrefix(b, []byte("PK")) {
			// Fuzz the pickle inside the seed's archive.
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			for _, zf := range zr.File {
				w, _ := zw.CreateHeader(&zip.FileHeader{Name: zf.Name, Method: zip.Store})
				if strings.HasSuffix(zf.Name, "data.pkl") {
					w.Write(b)
					continue
				}
				rc, _ := zf.Open()
				d := new(bytes.Buffer)
				d.ReadFrom(rc)
				rc.Close()
				w.Write(d.Bytes())
			}
			zw.Close()
			b = buf.Bytes()
		}
		sd, err := ReadTorch(b)
		if err != nil {
			return
		}
		var total int64
		for _, k := range sd.Keys {
			total += int64(len(sd.Tensors[k].F32))
		}
		if total > int64(len(b)) {
			t.Fatalf("%d elements from %d bytes", total, len(b))
		}
	})
}

// FuzzReadSafetensors: any bytes give tensors within the file's bounds or an
// error.
func FuzzReadSafetensors(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed.safetensors")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		sd, err := ReadSafetensors(b)
		if err != nil {
			return
		}
		var total int64
		for _, k := range sd.Keys {
			total += int64(len(sd.Tensors[k].F32))
		}
		if total > int64(len(b)) {
			t.Fatalf("%d elements from %d bytes", total, len(b))
		}
	})
}

// TestViewsOutOfRange checks views that reach past their storage, or would
// overflow computing how far they reach, are refused.
func TestViewsOutOfRange(t *testing.T) {
	raw := make([]byte, 16) // 4 float32s
	elems := int64(100)
	for _, v := range []pyTensor{
		{offset: 1 << 62, size: []int64{1}, stride: []int64{1}},
		{offset: -1, size: []int64{1}, stride: []int64{1}},
		{offset: 0, size: []int64{5}, stride: []int64{1}},
		{offset: 0, size: []int64{2, 2}, stride: []int64{3, 1}},
		{offset: 3, size: []int64{2}, stride: []int64{1}},
		{offset: 0, size: []int64{2, 2, 2}, stride: []int64{1 << 62, 1 << 62, 1}},
		{offset: 0, size: []int64{-1}, stride: []int64{1}},
	} {
		v.storage = &pyStorage{class: "FloatStorage", key: "0"}
		if _, err := materialize(raw, &v, &elems); err == nil {
			t.Errorf("offset %d size %v stride %v: read", v.offset, v.size, v.stride)
		}
	}
	ok := pyTensor{storage: &pyStorage{class: "FloatStorage", key: "0"}, offset: 1, size: []int64{3}, stride: []int64{1}}
	if _, err := materialize(raw, &ok, &elems); err != nil {
		t.Error(err)
	}
}
