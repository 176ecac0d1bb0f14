package savedmodel

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"google.golang.org/protobuf/proto"

	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// Bundle is a TensorFlow tensor bundle (a checkpoint): the entries of
// <prefix>.index and the data shards <prefix>.data-NNNNN-of-NNNNN they point
// into. Data is read on demand, one tensor at a time.
type Bundle struct {
	prefix    string
	numShards int
	entries   map[string]*corepb.BundleEntryProto
	keys      []string
}

// OpenBundle reads the index of the bundle at prefix (for a SavedModel,
// <dir>/variables/variables).
func OpenBundle(prefix string) (*Bundle, error) {
	f, err := os.Open(prefix + ".index")
	if err != nil {
		return nil, fmt.Errorf("variables index: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("variables index: %w", err)
	}
	if len(data) > maxTableBytes {
		return nil, fmt.Errorf("variables index %s.index is larger than %d bytes", prefix, maxTableBytes)
	}
	b, err := ParseBundleIndex(data)
	if err != nil {
		return nil, fmt.Errorf("variables index %s.index: %w", prefix, err)
	}
	b.prefix = prefix
	return b, nil
}

// ParseBundleIndex parses the bytes of a bundle's .index file. The result can
// list keys and entries; reading tensors needs a bundle from OpenBundle.
func ParseBundleIndex(data []byte) (*Bundle, error) {
	ents, err := readTable(data)
	if err != nil {
		return nil, err
	}
	if len(ents) == 0 || ents[0].Key != "" {
		return nil, corrupt("no bundle header (the entry under the empty key)")
	}
	var hdr corepb.BundleHeaderProto
	if err := proto.Unmarshal(ents[0].Value, &hdr); err != nil {
		return nil, corrupt("bundle header: %v", err)
	}
	if hdr.NumShards <= 0 || hdr.NumShards > 1<<20 {
		return nil, corrupt("bundle header says %d data shards", hdr.NumShards)
	}
	if hdr.Endianness != corepb.BundleHeaderProto_LITTLE {
		return nil, fmt.Errorf("tensor bundle is big-endian; re-save the model on a little-endian machine")
	}
	b := &Bundle{numShards: int(hdr.NumShards), entries: make(map[string]*corepb.BundleEntryProto, len(ents)-1)}
	for _, e := range ents[1:] {
		var be corepb.BundleEntryProto
		if err := proto.Unmarshal(e.Value, &be); err != nil {
			return nil, corrupt("entry %q: %v", e.Key, err)
		}
		if be.ShardId < 0 || int(be.ShardId) >= b.numShards {
			return nil, corrupt("entry %q is in shard %d of %d", e.Key, be.ShardId, b.numShards)
		}
		if be.Offset < 0 || be.Size < 0 {
			return nil, corrupt("entry %q has offset %d size %d", e.Key, be.Offset, be.Size)
		}
		b.entries[e.Key] = &be
		b.keys = append(b.keys, e.Key)
	}
	return b, nil
}

// Keys returns the checkpoint keys in order.
func (b *Bundle) Keys() []string { return slices.Clone(b.keys) }

// Has reports whether key is in the bundle.
func (b *Bundle) Has(key string) bool { _, ok := b.entries[key]; return ok }

func (b *Bundle) shardPath(id int32) string {
	return fmt.Sprintf("%s.data-%05d-of-%05d", b.prefix, id, b.numShards)
}

// Read returns the tensor stored under key, after checking its CRC-32C.
func (b *Bundle) Read(key string) (tensor.Tensor, error) {
	e, ok := b.entries[key]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("checkpoint has no variable %q", key)
	}
	if len(e.Slices) > 0 {
		return tensor.Tensor{}, fmt.Errorf("checkpoint variable %q is stored in slices (a partitioned variable), which is not supported; re-save it unpartitioned", key)
	}
	if b.prefix == "" {
		return tensor.Tensor{}, fmt.Errorf("bundle has no data files (parsed from bytes)")
	}
	f, err := os.Open(b.shardPath(e.ShardId))
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("checkpoint variable %q: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tensor.Tensor{}, err
	}
	if e.Offset > st.Size() || e.Size > st.Size()-e.Offset {
		return tensor.Tensor{}, corrupt("variable %q: bytes [%d, +%d) are outside the %d-byte shard %s", key, e.Offset, e.Size, st.Size(), b.shardPath(e.ShardId))
	}
	buf := make([]byte, e.Size)
	if _, err := f.ReadAt(buf, e.Offset); err != nil {
		return tensor.Tensor{}, fmt.Errorf("checkpoint variable %q: %w", key, err)
	}
	return DecodeEntry(key, e, buf)
}

// DecodeEntry turns the raw bytes of a bundle entry into a tensor, checking
// the entry's masked CRC-32C.
func DecodeEntry(name string, e *corepb.BundleEntryProto, buf []byte) (tensor.Tensor, error) {
	shape, err := ShapeOf(e.Shape)
	if e.Shape == nil {
		shape = []int64{} // a scalar's empty shape may be left out
	}
	if err != nil {
		return tensor.Tensor{}, corrupt("variable %q: %v", name, err)
	}
	if shape == nil {
		return tensor.Tensor{}, corrupt("variable %q has an unknown rank", name)
	}
	for _, d := range shape {
		if d < 0 {
			return tensor.Tensor{}, corrupt("variable %q: shape %v has an unknown dimension", name, shape)
		}
	}
	n, err := numElements(shape)
	if err != nil {
		return tensor.Tensor{}, corrupt("variable %q: %v", name, err)
	}
	t := tensor.Tensor{Name: name, Shape: shape}
	if e.Dtype == DTString {
		t.DType = tensor.String
		strs, crc, err := decodeStrings(buf, n)
		if err != nil {
			return tensor.Tensor{}, corrupt("variable %q: %v", name, err)
		}
		if maskCRC(crc) != e.Crc32C {
			return tensor.Tensor{}, corrupt("variable %q: checksum mismatch", name)
		}
		t.Strings = strs
		return t, nil
	}
	dt, ok := DTypeOf(e.Dtype)
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("variable %q has dtype %s, which is not supported", name, e.Dtype)
	}
	t.DType = dt
	if int64(len(buf)) != n*int64(dt.Size()) {
		return tensor.Tensor{}, corrupt("variable %q: %d bytes for %d elements of %s", name, len(buf), n, dt)
	}
	if maskCRC(crc32.Checksum(buf, castagnoli)) != e.Crc32C {
		return tensor.Tensor{}, corrupt("variable %q: checksum mismatch", name)
	}
	t.Data = buf
	return t, nil
}

// decodeStrings reads a DT_STRING entry: n varint64 lengths, a masked
// CRC-32C of those lengths (each as a little-endian uint32), then the bytes.
// It returns the entry's CRC, which covers the lengths as uint32s, the
// length checksum and the string bytes.
func decodeStrings(buf []byte, n int64) ([][]byte, uint32, error) {
	if n > int64(len(buf)) {
		return nil, 0, fmt.Errorf("%d strings in %d bytes", n, len(buf))
	}
	lens := make([]uint64, n)
	p := 0
	var crc uint32
	var u4 [4]byte
	for i := range lens {
		l, k := binary.Uvarint(buf[p:])
		if k <= 0 {
			return nil, 0, fmt.Errorf("string %d: bad length", i)
		}
		p += k
		lens[i] = l
		binary.LittleEndian.PutUint32(u4[:], uint32(l))
		crc = crc32.Update(crc, castagnoli, u4[:])
	}
	if len(buf)-p < 4 {
		return nil, 0, fmt.Errorf("string lengths are not followed by their checksum")
	}
	if binary.LittleEndian.Uint32(buf[p:]) != maskCRC(crc) {
		return nil, 0, fmt.Errorf("string length checksum mismatch")
	}
	crc = crc32.Update(crc, castagnoli, buf[p:p+4])
	p += 4
	strs := make([][]byte, n)
	for i, l := range lens {
		if l > uint64(len(buf)-p) {
			return nil, 0, fmt.Errorf("string %d of %d bytes runs past the entry", i, l)
		}
		strs[i] = buf[p : p+int(l)]
		crc = crc32.Update(crc, castagnoli, strs[i])
		p += int(l)
	}
	if p != len(buf) {
		return nil, 0, fmt.Errorf("%d trailing bytes after the strings", len(buf)-p)
	}
	return strs, crc, nil
}

func numElements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<40)/d) {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= d
	}
	return n, nil
}
