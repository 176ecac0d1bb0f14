package easycv

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"

	"github.com/eas-server/eas-server/internal/badinput"
)

// decodeBase64 accepts what Python's base64.b64decode and browsers send:
// standard or URL-safe alphabet, with or without padding, line breaks, and
// an optional data: URI prefix.
func decodeBase64(field, s string) ([]byte, error) {
	if strings.HasPrefix(s, "data:") {
		if i := strings.Index(s, ","); i >= 0 {
			s = s[i+1:]
		}
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', ' ', '\t':
			return -1
		}
		return r
	}, s)
	if s == "" {
		return nil, badinput.Errorf("%s: empty; send the image file's bytes base64-encoded", field)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return nil, badinput.Errorf("%s: not valid base64 (%v); send the image file's bytes base64-encoded", field, err)
}

// decodeImage decodes a JPEG or PNG and converts it to RGB as PIL's
// Image.convert("RGB") does (EasyCV converts every input image to RGB):
// gray is replicated, alpha is dropped (not composited), a palette is looked
// up, 16-bit samples keep their high byte. maxPixels bounds width x height,
// checked from the header before any pixel is decoded.
func decodeImage(field string, b []byte, maxPixels int64) (rgb, error) {
	var format string
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		format = "png"
	case bytes.HasPrefix(b, []byte{0xff, 0xd8}):
		format = "jpeg"
	default:
		return rgb{}, badinput.Errorf("%s: not a JPEG or PNG image (it starts with % x); send a JPEG or PNG file base64-encoded", field, b[:min(len(b), 8)])
	}
	decodeConfig, decode := png.DecodeConfig, png.Decode
	if format == "jpeg" {
		decodeConfig, decode = jpeg.DecodeConfig, jpeg.Decode
	}
	cfg, err := decodeConfig(bytes.NewReader(b))
	if err != nil {
		return rgb{}, badinput.Errorf("%s: cannot decode the %s header: %v", field, format, err)
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return rgb{}, badinput.Errorf("%s: the %s image is %dx%d; it has no pixels", field, format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return rgb{}, badinput.Errorf("%s: the %s image is %dx%d, over the %d-pixel limit (model_config.max_image_pixels)", field, format, cfg.Width, cfg.Height, maxPixels)
	}
	img, err := decode(bytes.NewReader(b))
	if err != nil {
		return rgb{}, badinput.Errorf("%s: cannot decode the %s image: %v", field, format, err)
	}
	return toRGB(img), nil
}

// toRGB converts a decoded image to 8-bit RGB the way PIL's convert("RGB")
// treats the same file.
func toRGB(img image.Image) rgb {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	out := rgb{w: w, h: h, pix: make([]uint8, 3*w*h)}
	put := func(i int, r, g, b uint8) { out.pix[3*i], out.pix[3*i+1], out.pix[3*i+2] = r, g, b }
	switch m := img.(type) {
	case *image.RGBA: // PNG truecolor without alpha: opaque, so not premultiplied
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				put(y*w+x, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.NRGBA: // truecolor or gray with alpha: PIL drops the alpha
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				put(y*w+x, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				put(y*w+x, row[x], row[x], row[x])
			}
		}
	case *image.Gray16: // PIL opens it as mode I and clips to 0..255 in convert
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				v := uint16(row[2*x])<<8 | uint16(row[2*x+1])
				g := uint8(min(v, 255))
				put(y*w+x, g, g, g)
			}
		}
	case *image.RGBA64: // 16-bit truecolor, opaque: PIL keeps the high byte
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				put(y*w+x, row[8*x], row[8*x+2], row[8*x+4])
			}
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				put(y*w+x, row[8*x], row[8*x+2], row[8*x+4])
			}
		}
	case *image.Paletted: // PIL looks colours up in the palette, ignoring tRNS
		pal := make([][3]uint8, len(m.Palette))
		for i, c := range m.Palette {
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			if rc, ok := c.(color.RGBA); ok && rc.A == 255 {
				n = color.NRGBA{rc.R, rc.G, rc.B, 255}
			}
			pal[i] = [3]uint8{n.R, n.G, n.B}
		}
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride:]
			for x := 0; x < w; x++ {
				var c [3]uint8
				if int(row[x]) < len(pal) {
					c = pal[row[x]]
				}
				put(y*w+x, c[0], c[1], c[2])
			}
		}
	case *image.YCbCr:
		if o, ok := jpegRGB(m); ok {
			return o
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
				put(y*w+x, c.R, c.G, c.B)
			}
		}
	default: // JPEG's CMYK: Go's colour conversion
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(img.At(r.Min.X+x, r.Min.Y+y)).(color.NRGBA)
				put(y*w+x, c.R, c.G, c.B)
			}
		}
	}
	return out
}
