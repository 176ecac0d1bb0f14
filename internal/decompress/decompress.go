// Package decompress undoes the request compression named by a service's
// metadata.rpc.decompressor. EAS clients compress the body without a
// Content-Encoding header, so the server must know the format from the
// service config and decompress before the processor sees the bytes.
//
// Every decoder stops at a caller-given output limit, so a small body that
// expands without bound (a decompression bomb) costs at most limit bytes of
// memory; errors say whether the body was too large (ErrTooLarge, HTTP 413)
// or not valid for its format (ErrCorrupt, HTTP 400). No decoder allocates
// from a size that a header merely declares (a snappy block length, a zstd
// window or content size, an LZ4 block's lengths): those are checked against
// the limit and against what the rest of the body can produce first. The
// one exception is an LZ4 frame's block size (64 KiB to 4 MiB): the library
// reader takes pooled buffers of that size whatever the frame holds.
//
// The formats follow what the EAS SDKs send:
//   - zlib: RFC 1950 (Go SDK compress/zlib, Java Deflater).
//   - gzip: RFC 1952, concatenated members allowed (Go SDK, Java GZIPOutputStream).
//   - snappy: the raw block format (Java Snappy.compress); the framed stream
//     format is also accepted when the body starts with its stream identifier.
//   - zstd: the standard frame format (Java Zstd.compress).
//   - lz4: the raw block format without a size header (the Java SDK's default
//     LZ4Utils.compress); the frame format is used when the body starts with
//     the LZ4 frame magic number.
//
// An empty body decompresses to an empty body for every kind, because the
// Java SDK sends empty payloads uncompressed.
//
// All functions are safe for concurrent use.
package decompress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The decompressor kinds accepted in metadata.rpc.decompressor.
const (
	Zlib   = "zlib"
	Gzip   = "gzip"
	Snappy = "snappy"
	Zstd   = "zstd"
	LZ4    = "lz4"
)

// maxLimit keeps limit+1 and the LZ4 length sums from overflowing.
const maxLimit = math.MaxInt64 >> 1

var kinds = []string{Gzip, LZ4, Snappy, Zlib, Zstd} // sorted

var (
	// ErrTooLarge reports a body that decompresses to more than the limit;
	// the server maps it to 413.
	ErrTooLarge = errors.New("decompressed body too large")
	// ErrCorrupt reports a body that is not valid data for the service's
	// decompressor; the server maps it to 400.
	ErrCorrupt = errors.New("corrupt compressed body")
	// ErrUnknownKind reports a decompressor name outside Kinds.
	ErrUnknownKind = errors.New("unknown decompressor")
)

// Kinds returns the accepted decompressor names, sorted.
func Kinds() []string { return slices.Clone(kinds) }

// Valid reports whether kind is an accepted decompressor name. Names are
// lowercase, as in EAS service.json files.
func Valid(kind string) bool { return slices.Contains(kinds, kind) }

// Decompress returns body decompressed with kind. The output may be at most
// limit bytes (limit must be positive); a larger output fails with an error
// wrapping ErrTooLarge without holding more than about limit bytes. An
// invalid body fails with an error wrapping ErrCorrupt. The empty kind
// means the service has no decompressor and returns body unchanged.
func Decompress(kind string, body []byte, limit int64) ([]byte, error) {
	if kind == "" {
		return body, nil
	}
	if !Valid(kind) {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownKind, kind, joinKinds())
	}
	if limit <= 0 {
		return nil, fmt.Errorf("decompress %s: limit must be positive, got %d", kind, limit)
	}
	limit = min(limit, maxLimit)
	if len(body) == 0 {
		return []byte{}, nil
	}
	var (
		out []byte
		err error
	)
	switch kind {
	case Gzip:
		out, err = gzipDecode(body, limit)
	case Zlib:
		out, err = zlibDecode(body, limit)
	case Snappy:
		out, err = snappyDecode(body, limit)
	case Zstd:
		out, err = zstdDecode(body, limit)
	case LZ4:
		out, err = lz4Decode(body, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("decompress %s: %w", kind, err)
	}
	return out, nil
}

func joinKinds() string {
	var b bytes.Buffer
	for i, k := range kinds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
	}
	return b.String()
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: the output exceeds the limit of %d bytes; send a smaller request or raise the body size limit", ErrTooLarge, limit)
}

func corrupt(err error) error {
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// readLimited reads r to EOF, failing with ErrTooLarge past limit bytes and
// with ErrCorrupt on any decoder error. Reading to EOF is what makes the
// stream decoders check their trailing checksums.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(out)) > limit {
		return nil, tooLarge(limit)
	}
	if err != nil {
		return nil, corrupt(err)
	}
	return out, nil
}

func gzipDecode(body []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, corrupt(err)
	}
	defer zr.Close()
	return readLimited(zr, limit)
}

func zlibDecode(body []byte, limit int64) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, corrupt(err)
	}
	defer zr.Close()
	return readLimited(zr, limit)
}

// snappyStreamID is the stream identifier chunk that starts every framed
// snappy stream. A raw block of 895 bytes could in principle start with the
// same bytes, so a body that starts with it but fails as a stream is tried
// again as a block.
var snappyStreamID = []byte("\xff\x06\x00\x00sNaPpY")

func snappyDecode(body []byte, limit int64) ([]byte, error) {
	if bytes.HasPrefix(body, snappyStreamID) {
		out, err := readLimited(snappy.NewReader(bytes.NewReader(body)), limit)
		if err == nil || errors.Is(err, ErrTooLarge) {
			return out, err
		}
		if blockOut, blockErr := snappyBlock(body, limit); blockErr == nil {
			return blockOut, nil
		}
		return nil, err
	}
	return snappyBlock(body, limit)
}

// snappyMaxExpansion bounds how many output bytes one input byte of a raw
// snappy block can stand for. The densest element is a 2-byte-offset copy:
// 3 bytes that repeat at most 64 bytes (a ratio of 21.3); a 1-byte-offset
// copy gives 11 bytes for 2, a 4-byte-offset copy 64 for 5, and literals
// less than one for one.
const snappyMaxExpansion = 22

func snappyBlock(body []byte, limit int64) ([]byte, error) {
	// The block header is the decoded length as a varint; snappy.Decode
	// allocates it before looking at the data, so a 6-byte body could claim
	// gigabytes. Check it against the limit, against what the rest of the
	// body can possibly expand to, and against the exact size the block's
	// elements add up to, all before allocating anything.
	declared, headerLen := binary.Uvarint(body)
	if headerLen <= 0 || declared > math.MaxUint32 {
		return nil, corrupt(errors.New("snappy block has no valid length header"))
	}
	n := int64(declared)
	if n > limit {
		return nil, tooLarge(limit)
	}
	elems := body[headerLen:]
	if n > int64(len(elems))*snappyMaxExpansion {
		return nil, corrupt(fmt.Errorf("snappy block declares %d bytes, more than its %d bytes of data can hold", n, len(elems)))
	}
	sum, err := snappyBlockLen(elems, n)
	if err != nil {
		return nil, err
	}
	if sum != n {
		return nil, corrupt(fmt.Errorf("snappy block declares %d bytes, its elements add up to %d", n, sum))
	}
	out, err := snappy.Decode(make([]byte, n), body)
	if err != nil {
		return nil, corrupt(err)
	}
	return out, nil
}

// snappyBlockLen adds up the output lengths of the elements of a raw snappy
// block (after the length header), without checking copy offsets (the
// decoder does that). It stops as soon as the sum passes want, since such a
// block cannot be valid.
//
// Each element starts with a tag byte whose low two bits give its kind:
// 0 a literal (length-1 in the upper six bits, or 60..63 meaning that 1..4
// little-endian bytes hold length-1), then the literal bytes; 1 a copy of
// 4+((tag>>2)&7) bytes with a 1-byte offset (plus 3 offset bits in the
// tag); 2 and 3 a copy of 1+(tag>>2) bytes with a 2- or 4-byte offset.
func snappyBlockLen(src []byte, want int64) (int64, error) {
	var total int64
	for i := 0; i < len(src); {
		tag := src[i]
		i++
		var n int64
		switch tag & 3 {
		case 0:
			n = int64(tag >> 2)
			if n >= 60 {
				extra := int(n) - 59
				if len(src)-i < extra {
					return 0, corrupt(errors.New("snappy block ends inside a literal length"))
				}
				n = 0
				for k := extra - 1; k >= 0; k-- {
					n = n<<8 | int64(src[i+k])
				}
				i += extra
			}
			n++
			if n > int64(len(src)-i) {
				return 0, corrupt(fmt.Errorf("snappy block declares a %d-byte literal, only %d bytes left", n, len(src)-i))
			}
			i += int(n)
		case 1:
			n = 4 + int64(tag>>2&7)
			i++
		case 2:
			n = 1 + int64(tag>>2)
			i += 2
		case 3:
			n = 1 + int64(tag>>2)
			i += 4
		}
		if i > len(src) {
			return 0, corrupt(errors.New("snappy block ends inside a copy offset"))
		}
		total += n
		if total > want {
			return 0, corrupt(fmt.Errorf("snappy block elements add up to more than the declared %d bytes", want))
		}
	}
	return total, nil
}

// zstdMinWindow is the window the zstd decoder always allows, whatever the
// limit: encoders pick windows of a few MiB for streamed input of unknown
// size, and refusing those for small limits would reject ordinary bodies.
// The window is only a permission here: DecodeAll keeps the history in the
// output it has produced, so a declared window costs no memory by itself.
const zstdMinWindow = 8 << 20

func zstdDecode(body []byte, limit int64) ([]byte, error) {
	// A frame header declares a content size and a window. The streaming
	// reader allocates its history ring from the declared window before
	// decoding the first block (a 10-byte frame declaring 64 MiB cost 64
	// MiB), so decode with DecodeAll, which grows the output only as blocks
	// decode, checks the decoded size after every block (at most 128 KiB),
	// and sizes its first buffer from the content size no larger than the
	// rest of the input can produce. A declared content size over the limit
	// is refused here before the decoder sees it.
	var h zstd.Header
	if err := h.Decode(body); err == nil && h.HasFCS && h.FrameContentSize > uint64(limit) {
		return nil, tooLarge(limit)
	}
	// A decoder per call keeps the limit per call; WithDecoderConcurrency(1)
	// decodes synchronously without goroutines.
	zr, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max(limit+1, zstdMinWindow))),
	)
	if err != nil {
		return nil, corrupt(err)
	}
	defer zr.Close()
	out, err := zr.DecodeAll(body, nil)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, tooLarge(limit)
	case err != nil:
		return nil, corrupt(err)
	case int64(len(out)) > limit:
		return nil, tooLarge(limit)
	case out == nil:
		return []byte{}, nil // a body of skippable frames only
	}
	return out, nil
}

// lz4FrameMagic is the little-endian magic number 0x184D2204 that starts an
// LZ4 frame.
var lz4FrameMagic = []byte{0x04, 0x22, 0x4d, 0x18}

func lz4Decode(body []byte, limit int64) ([]byte, error) {
	if bytes.HasPrefix(body, lz4FrameMagic) {
		return readLimited(lz4.NewReader(bytes.NewReader(body)), limit)
	}
	// A raw block carries no size, so walk its sequences to learn the exact
	// output size before allocating anything.
	n, err := lz4BlockLen(body, limit)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	got, err := lz4.UncompressBlock(body, out)
	if err != nil {
		return nil, corrupt(err)
	}
	if int64(got) != n {
		return nil, corrupt(fmt.Errorf("lz4 block decoded to %d bytes, its sequences declare %d", got, n))
	}
	return out, nil
}

// lz4BlockLen returns the decoded size of a raw LZ4 block by summing its
// literal and match lengths, without checking match offsets (the decoder
// does that). It stops with ErrTooLarge as soon as the sum passes limit.
//
// A block is a run of sequences: a token byte (literal length in the high
// nibble, match length minus 4 in the low nibble, 15 meaning "more bytes
// follow, each added until one is below 255"), the literals, and then a
// 2-byte offset and the match length; the last sequence normally ends after
// its literals.
func lz4BlockLen(src []byte, limit int64) (int64, error) {
	var total int64
	i := 0
	readLen := func(n int64) (int64, error) {
		for {
			if i >= len(src) {
				return 0, corrupt(errors.New("lz4 block ends inside a length"))
			}
			b := src[i]
			i++
			n += int64(b)
			if n > limit {
				return n, nil // the caller reports ErrTooLarge
			}
			if b != 255 {
				return n, nil
			}
		}
	}
	// Like the decoder, accept a block that ends right after a match even
	// though the format asks for a final literal-only sequence.
	for i < len(src) {
		token := src[i]
		i++
		lit := int64(token >> 4)
		if lit == 15 {
			var err error
			if lit, err = readLen(lit); err != nil {
				return 0, err
			}
		}
		if lit > int64(len(src)-i) {
			return 0, corrupt(fmt.Errorf("lz4 block declares %d literal bytes, only %d left", lit, len(src)-i))
		}
		i += int(lit)
		total += lit
		if total > limit {
			return 0, tooLarge(limit)
		}
		if i == len(src) {
			return total, nil
		}
		if len(src)-i < 2 {
			return 0, corrupt(errors.New("lz4 block ends inside a match offset"))
		}
		i += 2
		match := int64(token & 15)
		if match == 15 {
			var err error
			if match, err = readLen(match); err != nil {
				return 0, err
			}
		}
		total += match + 4
		if total > limit {
			return 0, tooLarge(limit)
		}
	}
	return total, nil
}
