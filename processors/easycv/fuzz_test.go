package easycv

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
)

// FuzzDecode feeds request bodies through Decode (JSON, base64, PNG/JPEG
// decoding, PIL resampling, crop, normalisation): every body is either a
// *badinput.Error or rows of the pipeline's size with finite values. It
// needs no model: Decode runs before the forward.
func FuzzDecode(f *testing.F) {
	enc := func(img image.Image, jpg bool) string {
		var b bytes.Buffer
		if jpg {
			jpeg.Encode(&b, img, nil)
		} else {
			png.Encode(&b, img)
		}
		return base64.StdEncoding.EncodeToString(b.Bytes())
	}
	rgba := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 37)
	}
	gray := image.NewGray16(image.Rect(0, 0, 2, 7))
	pal := image.NewPaletted(image.Rect(0, 0, 3, 3), color.Palette{color.Black, color.White})
	for _, s := range []string{
		`{"image":"` + enc(rgba, false) + `"}`,
		`[{"image":"` + enc(rgba, true) + `"},{"image":"` + enc(gray, false) + `"}]`,
		`{"image":"` + enc(pal, false) + `","other":1}`,
		`{"image":"data:image/png;base64,` + enc(gray, false) + `"}`,
		`{"image":""}`, `[]`, `{"image":null}`, `{"image":"iVBORw0KGgo="}`, `{"image":"/9j/"}`, `nonsense`,
	} {
		f.Add([]byte(s))
	}
	c := New()
	cfg := `{"type":"TorchClassifier","resize":16,"crop_size":8,"max_image_pixels":65536}`
	if err := c.Configure(processors.Spec{Code: Code, ModelSource: "m.pt", ModelConfig: []byte(cfg)}); err != nil {
		f.Fatal(err)
	}
	var err error
	if c.pipe, err = c.buildPipeline(defaultPipeline()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := c.Decode(t.Context(), &processors.Request{Body: body})
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("not a 400: %v", err)
			}
			return
		}
		if len(p.rows) == 0 || p.h != 8 || p.w != 8 {
			t.Fatalf("payload of %d rows at %dx%d", len(p.rows), p.w, p.h)
		}
		for _, r := range p.rows {
			if len(r) != 3*8*8 {
				t.Fatalf("row of %d values", len(r))
			}
			for _, v := range r {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("non-finite value")
				}
			}
		}
	})
}

// FuzzDecodeYolox feeds request bodies through a YoloXPredictor's Decode
// (base64, image decoding, OpenCV's resize, padding, normalisation): every
// body is either a *badinput.Error or 16x16 inputs with finite values and
// a positive scale factor.
func FuzzDecodeYolox(f *testing.F) {
	enc := func(img image.Image) string {
		var b bytes.Buffer
		png.Encode(&b, img)
		return base64.StdEncoding.EncodeToString(b.Bytes())
	}
	rgba := image.NewNRGBA(image.Rect(0, 0, 5, 3))
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(i * 37)
	}
	thin := image.NewGray(image.Rect(0, 0, 1, 300))
	for _, s := range []string{
		`{"image":"` + enc(rgba) + `"}`,
		`[{"image":"` + enc(rgba) + `"},{"image":"` + enc(thin) + `"}]`,
		`{"image":""}`, `[]`, `{"image":null}`, `nonsense`,
	} {
		f.Add([]byte(s))
	}
	c := New()
	if err := c.Configure(processors.Spec{Code: Code, ModelSource: "m.onnx", ModelConfig: []byte(`{"type":"YoloXPredictor","max_image_pixels":65536}`)}); err != nil {
		f.Fatal(err)
	}
	var err error
	c.det.pre, err = parseDetPipeline([]byte(`[{"type":"MMResize","img_scale":[16,16],"keep_ratio":true},
		{"type":"MMPad","pad_to_square":true,"pad_val":114},{"type":"MMNormalize","mean":[1,2,3],"std":[4,5,6],"to_rgb":true},
		{"type":"DefaultFormatBundle"},{"type":"Collect","keys":["img"]}]`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := c.Decode(t.Context(), &processors.Request{Body: body})
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("not a 400: %v", err)
			}
			return
		}
		if len(p.dets) == 0 {
			t.Fatal("no images")
		}
		for _, im := range p.dets {
			if im.h != 16 || im.w != 16 || len(im.x) != 3*16*16 || !(im.scale > 0) {
				t.Fatalf("input %dx%d, %d values, scale %v", im.w, im.h, len(im.x), im.scale)
			}
			for _, v := range im.x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("non-finite value")
				}
			}
		}
	})
}
