// Package decompress undoes the request compression named by a service's
// metadata.rpc.decompressor. EAS clients compress the body without a
// Content-Encoding header, so the server must know the format from the
// service config and decompress before the processor sees the bytes.
//
// Every decoder stops at a caller-given output limit, so a small body that
// expands without bound (a decompression bomb) costs at most limit bytes of
// memory; errors say whether the body was too large (ErrTooLarge, HTTP 413)
// or not valid for its format (ErrCorrupt, HTTP 400).
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

func snappyBlock(body []byte, limit int64) ([]byte, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return nil, corrupt(err)
	}
	if int64(n) > limit {
		return nil, tooLarge(limit)
	}
	out, err := snappy.Decode(make([]byte, n), body)
	if err != nil {
		return nil, corrupt(err)
	}
	return out, nil
}

// zstdMinWindow is the window the zstd decoder always allows, whatever the
// limit: encoders pick windows of a few MiB for streamed input of unknown
// size, and refusing those for small limits would reject ordinary bodies.
const zstdMinWindow = 8 << 20

func zstdDecode(body []byte, limit int64) ([]byte, error) {
	// A decoder per call keeps the limit per call; WithDecoderConcurrency(1)
	// decodes synchronously without goroutines.
	zr, err := zstd.NewReader(bytes.NewReader(body),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max(limit+1, zstdMinWindow))),
	)
	if err != nil {
		return nil, corrupt(err)
	}
	defer zr.Close()
	out, err := readLimited(zr, limit)
	if err != nil && (errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded)) {
		return nil, tooLarge(limit)
	}
	return out, err
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
