package savedmodel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/golang/snappy"
)

// The table format is LevelDB's (TensorFlow's lib/io/table keeps it):
// data blocks of prefix-compressed key/value entries, each block followed by
// a 5-byte trailer (compression type, masked CRC-32C), an index block mapping
// the last key of each data block to its handle, and a 48-byte footer.
const (
	footerLen      = 48
	tableMagic     = 0xdb4775248b80fb57
	blockTrailer   = 5
	noCompression  = 0
	snappyCompress = 1
	// maxTableBytes bounds the index file read into memory; real indexes
	// hold one small entry per variable.
	maxTableBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskCRC is the masking LevelDB and TensorFlow apply to stored CRC-32C
// values, so that a CRC of data that itself holds CRCs stays informative.
func maskCRC(c uint32) uint32 {
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// tableEntry is one key/value pair of a table, in key order.
type tableEntry struct {
	Key   string
	Value []byte
}

// ErrCorrupt marks a variables index or data file that does not follow the
// format: truncated, a bad checksum, an offset out of range.
var ErrCorrupt = errors.New("corrupt tensor bundle")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// readTable parses a whole LevelDB-format table held in data and returns its
// entries in order. Every block checksum is verified.
func readTable(data []byte) ([]tableEntry, error) {
	if len(data) < footerLen {
		return nil, corrupt("index is %d bytes, shorter than the %d-byte table footer", len(data), footerLen)
	}
	footer := data[len(data)-footerLen:]
	if binary.LittleEndian.Uint64(footer[40:]) != tableMagic {
		return nil, corrupt("index does not end with the table magic number; is it a variables.index file?")
	}
	_, n, err := readHandle(footer)
	if err != nil {
		return nil, corrupt("footer metaindex handle: %v", err)
	}
	idxOff, _, err := readHandle(footer[n:])
	if err != nil {
		return nil, corrupt("footer index handle: %v", err)
	}
	idx, err := readBlock(data[:len(data)-footerLen], idxOff)
	if err != nil {
		return nil, fmt.Errorf("index block: %w", err)
	}
	idxEntries, err := parseBlock(idx)
	if err != nil {
		return nil, fmt.Errorf("index block: %w", err)
	}
	var out []tableEntry
	for _, ie := range idxEntries {
		h, _, err := readHandle(ie.Value)
		if err != nil {
			return nil, corrupt("index entry %q: %v", ie.Key, err)
		}
		blk, err := readBlock(data[:len(data)-footerLen], h)
		if err != nil {
			return nil, fmt.Errorf("data block at %d: %w", h.off, err)
		}
		ents, err := parseBlock(blk)
		if err != nil {
			return nil, fmt.Errorf("data block at %d: %w", h.off, err)
		}
		out = append(out, ents...)
	}
	for i := 1; i < len(out); i++ {
		if out[i-1].Key >= out[i].Key {
			return nil, corrupt("keys out of order: %q then %q", out[i-1].Key, out[i].Key)
		}
	}
	return out, nil
}

type handle struct{ off, size uint64 }

func readHandle(b []byte) (handle, int, error) {
	off, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return handle{}, 0, errors.New("bad varint offset")
	}
	size, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 {
		return handle{}, 0, errors.New("bad varint size")
	}
	return handle{off, size}, n1 + n2, nil
}

// readBlock returns the uncompressed contents of the block at h after
// checking its trailer CRC.
func readBlock(data []byte, h handle) ([]byte, error) {
	if h.off > uint64(len(data)) || h.size > uint64(len(data))-h.off || uint64(len(data))-h.off-h.size < blockTrailer {
		return nil, corrupt("block [%d, +%d) is outside the %d-byte file", h.off, h.size, len(data))
	}
	raw := data[h.off : h.off+h.size+1] // contents and the type byte
	want := binary.LittleEndian.Uint32(data[h.off+h.size+1:])
	if got := maskCRC(crc32.Checksum(raw, castagnoli)); got != want {
		return nil, corrupt("block checksum %#x, trailer says %#x", got, want)
	}
	body := raw[:h.size]
	switch raw[h.size] {
	case noCompression:
		return body, nil
	case snappyCompress:
		n, err := snappy.DecodedLen(body)
		if err != nil || n > maxTableBytes {
			return nil, corrupt("snappy block: bad length")
		}
		out, err := snappy.Decode(nil, body)
		if err != nil {
			return nil, corrupt("snappy block: %v", err)
		}
		return out, nil
	default:
		return nil, corrupt("block compression type %d; only none (0) and snappy (1) exist", raw[h.size])
	}
}

// parseBlock decodes a block's prefix-compressed entries.
func parseBlock(b []byte) ([]tableEntry, error) {
	if len(b) < 4 {
		return nil, corrupt("block of %d bytes has no restart count", len(b))
	}
	nRestarts := binary.LittleEndian.Uint32(b[len(b)-4:])
	if uint64(nRestarts)*4+4 > uint64(len(b)) {
		return nil, corrupt("block claims %d restart points in %d bytes", nRestarts, len(b))
	}
	limit := len(b) - 4 - int(nRestarts)*4
	var out []tableEntry
	var key []byte
	for p := 0; p < limit; {
		shared, n1 := binary.Uvarint(b[p:limit])
		if n1 <= 0 {
			return nil, corrupt("entry at %d: bad shared length", p)
		}
		p += n1
		unshared, n2 := binary.Uvarint(b[p:limit])
		if n2 <= 0 {
			return nil, corrupt("entry at %d: bad key length", p)
		}
		p += n2
		vlen, n3 := binary.Uvarint(b[p:limit])
		if n3 <= 0 {
			return nil, corrupt("entry at %d: bad value length", p)
		}
		p += n3
		if shared > uint64(len(key)) || unshared > uint64(limit-p) || vlen > uint64(limit-p)-unshared {
			return nil, corrupt("entry at %d: lengths run past the block", p)
		}
		key = append(key[:shared], b[p:p+int(unshared)]...)
		p += int(unshared)
		out = append(out, tableEntry{Key: string(key), Value: b[p : p+int(vlen)]})
		p += int(vlen)
	}
	return out, nil
}
