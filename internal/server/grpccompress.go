package server

import (
	"compress/zlib"
	"io"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // registers "gzip"
)

// Triton's gRPC clients compress with compression_algorithm "gzip" or
// "deflate", gRPC core's two message codings. grpc-go registers gzip in its
// own package and has no deflate, which in gRPC core is the zlib format
// (RFC 1950), so it is registered here. A call answers in its request's
// coding. grpc-go bounds what a message decompresses to by the receive
// limit (grpc.MaxRecvMsgSize), so a small compressed message cannot expand
// without bound.
func init() { encoding.RegisterCompressor(deflateCompressor{}) }

// deflateCompressor is gRPC's "deflate" message coding.
type deflateCompressor struct{}

func (deflateCompressor) Name() string { return "deflate" }

func (deflateCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	return zlib.NewWriter(w), nil
}

func (deflateCompressor) Decompress(r io.Reader) (io.Reader, error) {
	return zlib.NewReader(r)
}
