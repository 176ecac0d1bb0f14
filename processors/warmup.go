package processors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// WarmupMagic starts a warm-up file that holds several requests.
//
// A warm_up_data_path file is either
//   - one request body in the service's wire format (what the EAS SDKs write
//     with req.to_string(); examples/requests/pytorch_mlp.pb is one), or
//   - WarmupMagic followed by records, each an unsigned varint byte length
//     and that many bytes of one request body (EncodeWarmup writes it).
//
// Every request is decoded and run once, in order, before the service
// reports ready; any failure fails the deploy with the request's index.
const WarmupMagic = "EAS-WARMUP-1\n"

// Limits on a warm-up file, so a wrong path (a model, a data set) fails fast.
const (
	maxWarmupFile     = 256 << 20
	maxWarmupRequests = 1000
)

// EncodeWarmup builds a multi-request warm-up file from request bodies.
func EncodeWarmup(bodies [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString(WarmupMagic)
	for _, body := range bodies {
		b.Write(binary.AppendUvarint(nil, uint64(len(body))))
		b.Write(body)
	}
	return b.Bytes()
}

// ParseWarmup splits a warm-up file into request bodies (see WarmupMagic).
func ParseWarmup(data []byte) ([][]byte, error) {
	rest, ok := bytes.CutPrefix(data, []byte(WarmupMagic))
	if !ok {
		if len(data) == 0 {
			return nil, errors.New("empty warm-up file; put one request body in it, or several in the EAS-WARMUP-1 format")
		}
		return [][]byte{data}, nil
	}
	var bodies [][]byte
	for len(rest) > 0 {
		if len(bodies) == maxWarmupRequests {
			return nil, fmt.Errorf("more than %d warm-up requests; a few representative ones are enough", maxWarmupRequests)
		}
		n, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, fmt.Errorf("warm-up record %d: bad length prefix at byte %d", len(bodies), len(data)-len(rest))
		}
		rest = rest[k:]
		if n > uint64(len(rest)) {
			return nil, fmt.Errorf("warm-up record %d: length %d but only %d bytes left; the file is truncated", len(bodies), n, len(rest))
		}
		bodies = append(bodies, rest[:n:n])
		rest = rest[n:]
	}
	if len(bodies) == 0 {
		return nil, errors.New("warm-up file has the EAS-WARMUP-1 header but no requests")
	}
	return bodies, nil
}

// ReadWarmup reads a warm_up_data_path file, within its size limit, and
// splits it into request bodies; errors name warm_up_data_path.
func ReadWarmup(ctx context.Context, path string) ([][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("warm_up_data_path: %w", err)
	}
	if st.Size() > maxWarmupFile {
		return nil, fmt.Errorf("warm_up_data_path: %s is %d bytes, over the %d limit; is it the right file?", path, st.Size(), maxWarmupFile)
	}
	data, err := ReadModel(ctx, path, maxWarmupFile)
	if err != nil {
		return nil, fmt.Errorf("warm_up_data_path: %w", err)
	}
	bodies, err := ParseWarmup(data)
	if err != nil {
		return nil, fmt.Errorf("warm_up_data_path: %w", err)
	}
	return bodies, nil
}
