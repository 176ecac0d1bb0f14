package processors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DefaultMaxModelBytes is the model size limit of a service whose
// Spec.MaxModelBytes is 0: 20 GiB, generous for any model this server
// reads into memory, small enough that an endless or mistaken file fails
// the load instead of the host.
const DefaultMaxModelBytes int64 = 20 << 30

// ModelLimit returns the service's model size limit: MaxModelBytes, or
// DefaultMaxModelBytes when that is 0 or negative.
func (s Spec) ModelLimit() int64 {
	if s.MaxModelBytes <= 0 {
		return DefaultMaxModelBytes
	}
	return s.MaxModelBytes
}

// ErrNotRegular is wrapped by the error for a model path that is not a
// regular file (a device, a FIFO, a socket): such a file can be endless or
// block its reader forever, so it is never read as a model.
var ErrNotRegular = errors.New("not a regular file")

// ErrModelTooLarge is wrapped by the error for a model file larger than the
// limit it is read under.
var ErrModelTooLarge = errors.New("model file too large")

// readChunk is the most one Read of a model file asks the OS for, so a
// cancelled load stops after at most this much more I/O.
const readChunk = 4 << 20

// StatModel checks that path (after symlinks) is a regular file of at most
// limit bytes, without opening it: opening a FIFO blocks and opening some
// devices has effects. limit <= 0 means DefaultMaxModelBytes. The errors
// wrap ErrNotRegular and ErrModelTooLarge, name path, and leave the prefix
// (model_path:, model_entry:) to the caller. ONNX Runtime reads its file
// itself: the onnx processor calls StatModel before handing it the path.
func StatModel(path string, limit int64) (fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return st, checkModel(path, st, limit)
}

func checkModel(path string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		return notRegular(path, st.Mode())
	}
	if limit <= 0 {
		limit = DefaultMaxModelBytes
	}
	if st.Size() > limit {
		return tooLarge(path, st.Size(), limit)
	}
	return nil
}

func notRegular(path string, m fs.FileMode) error {
	what := "not a file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	return fmt.Errorf("%s is %w (%s); only regular files are read", path, ErrNotRegular, what)
}

func tooLarge(path string, size, limit int64) error {
	return fmt.Errorf("%s is %d bytes, over the %d-byte limit on model files (%w); raise the server's --max-model-size if the model is right", path, size, limit, ErrModelTooLarge)
}

// OpenModel opens the regular file at path for reading a model from it
// under limit bytes (<= 0: DefaultMaxModelBytes) and ctx:
//   - a path that is not a regular file after symlinks (a device, a FIFO, a
//     socket) is refused before it is opened (ErrNotRegular);
//   - a file larger than limit is refused before a byte is read, and one
//     that grows past limit while being read fails the Read
//     (ErrModelTooLarge);
//   - every Read first checks ctx, and reads at most 4 MiB, so a cancelled
//     load stops promptly with ctx.Err() (unwrapped) from its read loop.
func OpenModel(ctx context.Context, path string, limit int64) (io.ReadCloser, error) {
	r, _, err := openModel(ctx, path, limit)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func openModel(ctx context.Context, path string, limit int64) (*modelReader, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		limit = DefaultMaxModelBytes
	}
	if _, err := StatModel(path, limit); err != nil {
		return nil, 0, err
	}
	// Non-blocking, in case path was swapped for a FIFO since the Stat:
	// the open returns at once and the Fstat below refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil {
		err = checkModel(path, st, limit)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return &modelReader{ctx: ctx, f: f, path: path, limit: limit}, st.Size(), nil
}

// modelReader is OpenModel's reader.
type modelReader struct {
	ctx   context.Context
	f     *os.File
	path  string
	limit int64
	n     int64 // bytes read so far
}

func (r *modelReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	// Read at most one byte past the limit: enough to know the file is over it.
	if rest := r.limit + 1 - r.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.f.Read(p)
	r.n += int64(n)
	if r.n > r.limit {
		return 0, tooLarge(r.path, r.n, r.limit)
	}
	return n, err
}

func (r *modelReader) Close() error { return r.f.Close() }

// ReadModel reads the whole model file at path into memory, with OpenModel's
// checks: regular files only, at most limit bytes (<= 0:
// DefaultMaxModelBytes), and ctx checked between 4 MiB chunks (a cancelled
// read returns ctx.Err()). The buffer is sized from the file's size, so a
// file within the limit is read without copies.
func ReadModel(ctx context.Context, path string, limit int64) ([]byte, error) {
	r, size, err := openModel(ctx, path, limit)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// One byte more than the size, so a file that has not grown ends with
	// io.EOF without growing the buffer.
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
