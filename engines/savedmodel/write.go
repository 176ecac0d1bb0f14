package savedmodel

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/proto"

	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// WriteBundle writes tensors as a one-shard tensor bundle at prefix
// (<prefix>.index and <prefix>.data-00000-of-00001), keyed by tensor name,
// in the format TensorFlow's BundleWriter produces; snappy compresses the
// index blocks as TensorFlow may. It lets tests and tools build SavedModels
// without TensorFlow.
func WriteBundle(prefix string, tensors []tensor.Tensor, snappyBlocks bool) error {
	index, data, err := EncodeBundle(tensors, snappyBlocks)
	if err != nil {
		return err
	}
	if err := os.WriteFile(prefix+".data-00000-of-00001", data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(prefix+".index", index, 0o644)
}

// EncodeBundle returns the bytes of a one-shard bundle's index and data.
func EncodeBundle(tensors []tensor.Tensor, snappyBlocks bool) (index, data []byte, err error) {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b tensor.Tensor) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	hdr, _ := proto.Marshal(&corepb.BundleHeaderProto{NumShards: 1})
	ents := []tableEntry{{Key: "", Value: hdr}}
	for i, t := range sorted {
		if t.Name == "" || (i > 0 && sorted[i-1].Name == t.Name) {
			return nil, nil, fmt.Errorf("bundle tensors need distinct non-empty names, got %q", t.Name)
		}
		dt, ok := TFDType(t.DType)
		if !ok {
			return nil, nil, fmt.Errorf("tensor %q: dtype %s has no TensorFlow equivalent", t.Name, t.DType)
		}
		var raw []byte
		var crc uint32
		if t.DType == tensor.String {
			raw, crc = encodeStrings(t.Strings)
		} else {
			raw = t.Data
			crc = crc32.Checksum(raw, castagnoli)
		}
		shape := &shapepb.TensorShapeProto{}
		for _, d := range t.Shape {
			shape.Dim = append(shape.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
		}
		e, _ := proto.Marshal(&corepb.BundleEntryProto{
			Dtype: dt, Shape: shape, Offset: int64(len(data)), Size: int64(len(raw)), Crc32C: maskCRC(crc),
		})
		data = append(data, raw...)
		ents = append(ents, tableEntry{Key: t.Name, Value: e})
	}
	return writeTable(ents, snappyBlocks), data, nil
}

func encodeStrings(strs [][]byte) ([]byte, uint32) {
	var out []byte
	var crc uint32
	var u4 [4]byte
	for _, s := range strs {
		out = binary.AppendUvarint(out, uint64(len(s)))
		binary.LittleEndian.PutUint32(u4[:], uint32(len(s)))
		crc = crc32.Update(crc, castagnoli, u4[:])
	}
	binary.LittleEndian.PutUint32(u4[:], maskCRC(crc))
	out = append(out, u4[:]...)
	crc = crc32.Update(crc, castagnoli, u4[:])
	for _, s := range strs {
		out = append(out, s...)
		crc = crc32.Update(crc, castagnoli, s)
	}
	return out, crc
}

// writeTable lays out a LevelDB table with one data block; every entry is a
// restart point (no prefix sharing), which readers accept.
func writeTable(ents []tableEntry, snappyBlocks bool) []byte {
	var file []byte
	put := func(block []byte, typ byte) handle {
		h := handle{uint64(len(file)), uint64(len(block))}
		file = append(file, block...)
		file = append(file, typ)
		file = binary.LittleEndian.AppendUint32(file, maskCRC(crc32.Checksum(append(slices.Clone(block), typ), castagnoli)))
		return h
	}
	block := func(es []tableEntry) ([]byte, byte) {
		var b []byte
		var restarts []uint32
		for _, e := range es {
			restarts = append(restarts, uint32(len(b)))
			b = binary.AppendUvarint(b, 0)
			b = binary.AppendUvarint(b, uint64(len(e.Key)))
			b = binary.AppendUvarint(b, uint64(len(e.Value)))
			b = append(b, e.Key...)
			b = append(b, e.Value...)
		}
		if len(restarts) == 0 {
			restarts = []uint32{0}
		}
		for _, r := range restarts {
			b = binary.LittleEndian.AppendUint32(b, r)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(restarts)))
		if snappyBlocks {
			return snappy.Encode(nil, b), snappyCompress
		}
		return b, noCompression
	}
	dh := put(block(ents))
	mh := put(block(nil))
	lastKey := ents[len(ents)-1].Key + "\x00"
	hv := binary.AppendUvarint(nil, dh.off)
	hv = binary.AppendUvarint(hv, dh.size)
	ih := put(block([]tableEntry{{Key: lastKey, Value: hv}}))
	footer := binary.AppendUvarint(nil, mh.off)
	footer = binary.AppendUvarint(footer, mh.size)
	footer = binary.AppendUvarint(footer, ih.off)
	footer = binary.AppendUvarint(footer, ih.size)
	footer = append(footer, make([]byte, 40-len(footer))...)
	footer = binary.LittleEndian.AppendUint64(footer, tableMagic)
	return append(file, footer...)
}
