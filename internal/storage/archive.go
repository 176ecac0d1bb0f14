package storage

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bounds what one archive may expand to, against archive bombs.
type Limits struct {
	// MaxBytes is the most bytes all files of an archive may hold once
	// unpacked; 0 means DefaultLimits.MaxBytes.
	MaxBytes int64
	// MaxEntries is the most entries (files, directories, links) an
	// archive may have; 0 means DefaultLimits.MaxEntries.
	MaxEntries int
}

// DefaultLimits are the limits used where a Limits field is zero: larger
// than any model we know of, small enough to stop a bomb before the disk fills.
var DefaultLimits = Limits{MaxBytes: 64 << 30, MaxEntries: 200_000}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	return l
}

type archiveKind int

const (
	archiveNone archiveKind = iota
	archiveZip
	archiveTar
	archiveTarGz
	archiveTarBz2
)

// archiveKindOf tells the archive kind by the name's suffix, the way EAS
// users name them; a model file that merely starts like an archive (an
// ONNX file is a protobuf, a PyTorch .pt file is a zip) is left alone.
func archiveKindOf(name string) archiveKind {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".zip"):
		return archiveZip
	case strings.HasSuffix(n, ".tar"):
		return archiveTar
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return archiveTarGz
	case strings.HasSuffix(n, ".tar.bz2"), strings.HasSuffix(n, ".tbz2"):
		return archiveTarBz2
	}
	return archiveNone
}

// IsArchive reports whether Fetch unpacks a file of this name.
func IsArchive(name string) bool { return archiveKindOf(name) != archiveNone }

// Extract unpacks the archive at src, whose kind its name tells (.zip,
// .tar, .tar.gz, .tgz, .tar.bz2, .tbz2), into the existing directory dst.
// It refuses entries whose names leave dst (zip-slip), links that resolve
// outside dst or to nothing, and archives past lim, with an error wrapping
// ErrUnsafeArchive. Devices and FIFOs are skipped. On error dst may hold
// part of the archive; the caller removes it.
func Extract(src, dst string, lim Limits) error {
	kind := archiveKindOf(src)
	if kind == archiveNone {
		return fmt.Errorf("extract %s: not an archive name; expected .zip, .tar, .tar.gz, .tgz, .tar.bz2 or .tbz2", filepath.Base(src))
	}
	return extractKind(src, kind, dst, lim.withDefaults())
}

func extractKind(src string, kind archiveKind, dst string, lim Limits) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root, lim: lim}
	if kind == archiveZip {
		err = x.zip(src)
	} else {
		err = x.tarFile(src, kind)
	}
	if err != nil {
		return err
	}
	return checkLinks(dst, x.links)
}

type extractor struct {
	root    *os.Root
	lim     Limits
	entries int
	bytes   int64
	links   []string // symlinks made, archive-relative
}

func (x *extractor) count(name string) error {
	x.entries++
	if x.entries > x.lim.MaxEntries {
		return fmt.Errorf("%w: more than %d entries (at %q); the limit stops archive bombs: unpack it yourself and give the directory, or raise the limit", ErrUnsafeArchive, x.lim.MaxEntries, name)
	}
	return nil
}

// cleanName turns an archive entry name into a path relative to the
// target, or refuses it. "" means the entry is the target itself.
func cleanName(name string) (string, error) {
	n := path.Clean(name)
	if n == "." {
		return "", nil
	}
	if path.IsAbs(name) || !filepath.IsLocal(filepath.FromSlash(n)) || strings.Contains(n, "\x00") {
		return "", fmt.Errorf("%w: entry %q would be written outside the target directory (zip-slip); rebuild the archive with relative paths inside it", ErrUnsafeArchive, name)
	}
	return filepath.FromSlash(n), nil
}

func (x *extractor) mkdirAll(rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	return x.root.MkdirAll(rel, 0o755)
}

// refuseThroughLink stops an entry from being written where a link of the
// archive already stands, so that a later entry cannot use an earlier link
// to reach elsewhere.
func (x *extractor) refuseThroughLink(name, rel string) error {
	for p := rel; p != "." && p != string(filepath.Separator) && p != ""; p = filepath.Dir(p) {
		if st, err := x.root.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: entry %q is written through the link %q; rebuild the archive without links over directories", ErrUnsafeArchive, name, filepath.ToSlash(p))
		}
	}
	return nil
}

func (x *extractor) file(name, rel string, mode fs.FileMode, r io.Reader) error {
	if err := x.refuseThroughLink(name, rel); err != nil {
		return err
	}
	if err := x.mkdirAll(filepath.Dir(rel)); err != nil {
		return err
	}
	perm := mode.Perm()&0o755 | 0o644 // readable by a worker running as a uid of its own
	f, err := x.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	left := x.lim.MaxBytes - x.bytes
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	x.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("entry %q: %w", name, err)
	}
	if n > left {
		return fmt.Errorf("%w: expands past the limit of %d bytes (at %q); the limit stops archive bombs: unpack it yourself and give the directory, or raise the limit", ErrUnsafeArchive, x.lim.MaxBytes, name)
	}
	return nil
}

func (x *extractor) symlink(name, rel, target string) error {
	if err := x.refuseThroughLink(name, rel); err != nil {
		return err
	}
	t := filepath.FromSlash(target)
	if filepath.IsAbs(t) || strings.HasPrefix(target, "/") || !filepath.IsLocal(filepath.Join(filepath.Dir(rel), t)) {
		return fmt.Errorf("%w: link %q points to %q, outside the target directory; rebuild the archive with links that stay inside it", ErrUnsafeArchive, name, target)
	}
	if err := x.mkdirAll(filepath.Dir(rel)); err != nil {
		return err
	}
	_ = x.root.Remove(rel)
	if err := x.root.Symlink(t, rel); err != nil {
		return fmt.Errorf("entry %q: %w", name, err)
	}
	x.links = append(x.links, rel)
	return nil
}

func (x *extractor) hardlink(name, rel, target string) error {
	trel, err := cleanName(target)
	if err != nil || trel == "" {
		return fmt.Errorf("%w: hard link %q points to %q, outside the target directory; rebuild the archive with links that stay inside it", ErrUnsafeArchive, name, target)
	}
	if err := x.refuseThroughLink(name, rel); err != nil {
		return err
	}
	if err := x.refuseThroughLink(name, trel); err != nil {
		return err
	}
	if err := x.mkdirAll(filepath.Dir(rel)); err != nil {
		return err
	}
	_ = x.root.Remove(rel)
	if err := x.root.Link(trel, rel); err != nil {
		return fmt.Errorf("%w: hard link %q to %q: %v", ErrUnsafeArchive, name, target, err)
	}
	return nil
}

func (x *extractor) zip(src string) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return fmt.Errorf("open zip: %w; the file is not a zip archive or is truncated", err)
	}
	defer zr.Close()
	if len(zr.File) > x.lim.MaxEntries {
		return fmt.Errorf("%w: %d entries, more than the limit of %d; the limit stops archive bombs: unpack it yourself and give the directory, or raise the limit", ErrUnsafeArchive, len(zr.File), x.lim.MaxEntries)
	}
	for _, zf := range zr.File {
		if err := x.count(zf.Name); err != nil {
			return err
		}
		// Tools on Windows write backslashes; the format says slashes.
		name := strings.ReplaceAll(zf.Name, `\`, "/")
		rel, err := cleanName(name)
		if err != nil {
			return err
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			if rel != "" {
				if err := x.refuseThroughLink(zf.Name, rel); err != nil {
					return err
				}
			}
			if err := x.mkdirAll(rel); err != nil {
				return err
			}
		case rel == "":
			return fmt.Errorf("%w: a file entry named %q has no name", ErrUnsafeArchive, zf.Name)
		case mode&fs.ModeSymlink != 0:
			target, err := readSmall(zf)
			if err != nil {
				return fmt.Errorf("entry %q: %w", zf.Name, err)
			}
			if err := x.symlink(zf.Name, rel, target); err != nil {
				return err
			}
		case mode.IsRegular():
			rc, err := zf.Open()
			if err != nil {
				return fmt.Errorf("entry %q: %w", zf.Name, err)
			}
			err = x.file(zf.Name, rel, mode, rc)
			rc.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func readSmall(zf *zip.File) (string, error) {
	rc, err := zf.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4097))
	if err != nil {
		return "", err
	}
	if len(b) > 4096 {
		return "", errors.New("link target longer than 4096 bytes")
	}
	return string(b), nil
}

func (x *extractor) tarFile(src string, kind archiveKind) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	switch kind {
	case archiveTarGz:
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("open gzip: %w; the file is not gzip-compressed or is truncated", err)
		}
		defer gz.Close()
		r = gz
	case archiveTarBz2:
		r = bzip2.NewReader(f)
	}
	return x.tar(r)
}

func (x *extractor) tar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if x.entries == 0 {
				return errors.New("read tar: the archive has no entries")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w; the file is not a tar archive of this kind or is truncated", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := x.count(h.Name); err != nil {
			return err
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if rel != "" {
				if err := x.refuseThroughLink(h.Name, rel); err != nil {
					return err
				}
			}
			if err := x.mkdirAll(rel); err != nil {
				return err
			}
		case tar.TypeReg, tar.TypeGNUSparse: // archive/tar reports the old TypeRegA as TypeReg
			if rel == "" {
				return fmt.Errorf("%w: a file entry named %q has no name", ErrUnsafeArchive, h.Name)
			}
			if err := x.file(h.Name, rel, fs.FileMode(h.Mode), tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if rel == "" {
				return fmt.Errorf("%w: a link entry named %q has no name", ErrUnsafeArchive, h.Name)
			}
			if err := x.symlink(h.Name, rel, h.Linkname); err != nil {
				return err
			}
		case tar.TypeLink:
			if rel == "" {
				return fmt.Errorf("%w: a link entry named %q has no name", ErrUnsafeArchive, h.Name)
			}
			if err := x.hardlink(h.Name, rel, h.Linkname); err != nil {
				return err
			}
		default:
			// Devices, FIFOs and the like have no place in a model.
		}
	}
}

// checkLinks resolves every symlink the archive made and refuses one that
// ends outside dst or at nothing: a chain of links can leave the tree even
// when each looks inside it on its own.
func checkLinks(dst string, links []string) error {
	if len(links) == 0 {
		return nil
	}
	realDst, err := filepath.EvalSymlinks(dst)
	if err != nil {
		return err
	}
	for _, l := range links {
		p := filepath.Join(dst, l)
		if st, err := os.Lstat(p); err != nil || st.Mode()&fs.ModeSymlink == 0 {
			continue // replaced by a later entry
		}
		target, _ := os.Readlink(p)
		res, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("%w: link %q points to %q, which does not exist in the archive", ErrUnsafeArchive, filepath.ToSlash(l), target)
		}
		rel, err := filepath.Rel(realDst, res)
		if err != nil || !(rel == "." || filepath.IsLocal(rel)) {
			return fmt.Errorf("%w: link %q points to %q, which resolves outside the target directory; rebuild the archive with links that stay inside it", ErrUnsafeArchive, filepath.ToSlash(l), target)
		}
	}
	return nil
}

// unpack extracts the archive at src into dst and returns the model's
// directory: dst itself.
func (f *Fetcher) unpack(src, dst string) (string, error) {
	if err := extractKind(src, archiveKindOf(src), dst, f.Limits); err != nil {
		return "", err
	}
	return dst, nil
}
