package queue

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// The media types of the queue API, as the EAS SDKs send them in Accept.
const (
	MediaProtobuf = "application/vnd.google.protobuf"
	MediaJSON     = "application/json"
)

// The wire messages (EAS's queueservice.proto):
//
//	DataFrameProto     { uint64 index = 1; map<string,string> tags = 2; bytes data = 3; string message = 4; }
//	DataFrameListProto { repeated DataFrameProto index = 1; }
//	AttributesProto    { map<string,string> attributes = 1; }
//
// written with protowire: three small messages do not need generated code.

// AppendFrame appends f as a DataFrameProto.
func AppendFrame(b []byte, f Frame) []byte {
	b = appendFrameHead(b, f)
	b = append(b, f.Data...)
	return appendFrameTail(b, f)
}

// appendFrameHead appends a DataFrameProto up to its data's bytes (the
// index, the tags, the data's tag and length), appendFrameTail what
// follows them: a frame is written around its data without copying it.
func appendFrameHead(b []byte, f Frame) []byte {
	if f.Index != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, f.Index)
	}
	b = appendMap(b, 2, f.Tags)
	if len(f.Data) > 0 {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(f.Data)))
	}
	return b
}

func appendFrameTail(b []byte, f Frame) []byte {
	if f.Message != "" {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, f.Message)
	}
	return b
}

// AppendFrameList appends frames as a DataFrameListProto.
func AppendFrameList(b []byte, frames []Frame) []byte {
	for _, f := range frames {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, AppendFrame(nil, f))
	}
	return b
}

// AppendAttributes appends an AttributesProto.
func AppendAttributes(b []byte, attrs map[string]string) []byte { return appendMap(b, 1, attrs) }

func appendMap(b []byte, num protowire.Number, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, m[k])
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

var errWire = errors.New("queue: malformed protobuf message")

// ParseFrame reads a DataFrameProto.
func ParseFrame(b []byte) (Frame, error) {
	var f Frame
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			f.Index = x
		case num == 2 && typ == protowire.BytesType:
			k, val, err := parseTag(v)
			if err != nil {
				return err
			}
			if f.Tags == nil {
				f.Tags = map[string]string{}
			}
			f.Tags[k] = val
		case num == 3 && typ == protowire.BytesType:
			f.Data = append([]byte(nil), v...)
		case num == 4 && typ == protowire.BytesType:
			f.Message = string(v)
		}
		return nil
	})
	return f, err
}

// ParseFrameList reads a DataFrameListProto.
func ParseFrameList(b []byte) ([]Frame, error) {
	var out []Frame
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		f, err := ParseFrame(v)
		if err != nil {
			return err
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// ParseAttributes reads an AttributesProto.
func ParseAttributes(b []byte) (map[string]string, error) {
	out := map[string]string{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		k, val, err := parseTag(v)
		out[k] = val
		return err
	})
	return out, err
}

// fields walks a message's fields; v is a length-delimited value, x a
// varint.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errWire
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// frameJSON is a frame in the JSON form of the EAS SDKs: the data base64.
type frameJSON struct {
	Index   uint64            `json:"index"`
	Message string            `json:"message,omitempty"`
	Tags    map[string]string `json:"tags"`
	Data    string            `json:"data"`
}

func toJSON(f Frame) frameJSON {
	return frameJSON{Index: f.Index, Message: f.Message, Tags: f.Tags, Data: base64.StdEncoding.EncodeToString(f.Data)}
}

// EncodeFrames encodes a frame list in the media type asked for.
func EncodeFrames(media string, frames []Frame) []byte {
	if media == MediaJSON {
		js := make([]frameJSON, len(frames))
		for i, f := range frames {
			js[i] = toJSON(f)
		}
		b, _ := json.Marshal(js)
		return b
	}
	return AppendFrameList(nil, frames)
}

// EncodeFrame encodes one frame in the media type asked for.
func EncodeFrame(media string, f Frame) []byte {
	if media == MediaJSON {
		b, _ := json.Marshal(toJSON(f))
		return b
	}
	return AppendFrame(nil, f)
}

// writeListFrame writes f as one element of a DataFrameListProto: the
// same bytes as AppendFrameList, the data written, not copied.
func writeListFrame(w io.Writer, f Frame) error {
	head := appendFrameHead(nil, f)
	tail := appendFrameTail(nil, f)
	pre := protowire.AppendTag(nil, 1, protowire.BytesType)
	pre = protowire.AppendVarint(pre, uint64(len(head)+len(f.Data)+len(tail)))
	for _, b := range [][]byte{pre, head, f.Data, tail} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// writeFrameJSON writes f as EncodeFrame's JSON, the data base64-encoded
// on its way out rather than built whole.
func writeFrameJSON(w io.Writer, f Frame) error {
	b, _ := json.Marshal(frameJSON{Index: f.Index, Message: f.Message, Tags: f.Tags})
	b = bytes.TrimSuffix(b, []byte(`"}`)) // data is the last field: "data":""}
	if _, err := w.Write(b); err != nil {
		return err
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := enc.Write(f.Data); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, `"}`)
	return err
}

func writeJSON(w io.Writer, v any) int {
	b, _ := json.Marshal(v)
	w.Write(b) //nolint:errcheck // the client may be gone
	return 200
}
