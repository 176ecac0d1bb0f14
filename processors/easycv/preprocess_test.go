package easycv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// TestResizeMatchesPillow compares resize with PIL's Image.resize byte for
// byte: down, up, one axis, to 1x1, each filter.
func TestResizeMatchesPillow(t *testing.T) {
	r := loadRefs(t)
	src := rgb{w: 37, h: 23, pix: unb64(t, r.ResizeSrc)}
	for _, c := range r.Resize {
		got := resize(src, c.W, c.H, filters[c.Filter])
		want := unb64(t, c.Out)
		if got.w != c.W || got.h != c.H || !bytes.Equal(got.pix, want) {
			t.Errorf("%s 37x23 -> %dx%d: %d of %d bytes differ", c.Filter, c.W, c.H, diffCount(got.pix, want), len(want))
		}
	}
}

func diffCount(a, b []byte) int {
	if len(a) != len(b) {
		return max(len(a), len(b))
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestPreprocessMatchesEasyCV decodes each test image, runs each pipeline
// variant and compares with PIL + torchvision: PNGs bit for bit (the uint8
// image and the float32 tensor); the JPEG within a small mean difference
// (Go's IDCT is not libjpeg's; chroma upsampling and colour conversion
// are libjpeg's).
func TestPreprocessMatchesEasyCV(t *testing.T) {
	r := loadRefs(t)
	dir := generated(t)
	for vname, v := range r.Variants {
		p, err := parsePipeline(v.TestPipeline)
		if err != nil {
			t.Fatalf("%s: %v", vname, err)
		}
		for name, c := range v.Images {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			img, err := decodeImage("image", b, defaultMaxPixels)
			if err != nil {
				t.Fatalf("%s/%s: %v", vname, name, err)
			}
			pre := p.apply(img)
			want := unb64(t, c.Pre)
			if pre.w != c.PreW || pre.h != c.PreH {
				t.Fatalf("%s/%s: preprocessed to %dx%d, PIL to %dx%d", vname, name, pre.w, pre.h, c.PreW, c.PreH)
			}
			row := make([]float32, 3*pre.w*pre.h)
			p.toCHW(pre, row)
			sum := sha256.Sum256(unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), 4*len(row)))
			if strings.HasSuffix(name, ".jpg") {
				total := 0
				for i := range want {
					total += abs(int(pre.pix[i]) - int(want[i]))
				}
				mean := float64(total) / float64(len(want))
				t.Logf("%s/%s: mean absolute difference %.3f from PIL", vname, name, mean)
				if mean > 0.25 {
					t.Errorf("%s/%s: mean absolute difference %.3f from PIL, want <= 0.25", vname, name, mean)
				}
				continue
			}
			if n := diffCount(pre.pix, want); n > 0 {
				t.Errorf("%s/%s: %d of %d bytes differ from PIL", vname, name, n, len(want))
				continue
			}
			if hex.EncodeToString(sum[:]) != c.TensorSHA256 {
				t.Errorf("%s/%s: the float32 tensor differs from torchvision's", vname, name)
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestCenterCropRounding(t *testing.T) {
	// 5 wide, crop 2: round(1.5) = 2 (half to even); 7 wide, crop 2: round(2.5) = 2.
	img := rgb{w: 5, h: 1, pix: []uint8{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}}
	if got := centerCrop(img, 1, 2); got.pix[0] != 2 {
		t.Errorf("crop 2 of 5 starts at %d, want 2", got.pix[0])
	}
	img = rgb{w: 7, h: 1, pix: make([]uint8, 21)}
	for i := range 7 {
		img.pix[3*i] = uint8(i)
	}
	if got := centerCrop(img, 1, 2); got.pix[0] != 2 {
		t.Errorf("crop 2 of 7 starts at %d, want 2", got.pix[0])
	}
}
