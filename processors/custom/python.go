package custom

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// allspark is the Python package a python processor imports: its
// BaseProcessor speaks package frame on descriptor 3, and its batchhost
// serves a batch-inference model class. batchinference holds eas-server's
// stand-in batch_inference package, which batchhost puts on sys.path only
// where the interpreter has no batch_inference of its own.
//
//go:embed allspark/*.py batchinference/batch_inference/*.py batchinference/batch_inference/batcher/*.py
var allspark embed.FS

// embeddedPython lists the embedded files, in a fixed order.
func embeddedPython() []string {
	var files []string
	fs.WalkDir(allspark, ".", func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // an embed.FS
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// EnvPython names the Python interpreter python processors run on
// ("python3" on PATH when unset).
const EnvPython = "EAS_PYTHON"

// EnvVenvDir names the directory per-service virtualenvs are built in
// (the user cache directory's eas-server/venvs when unset).
const EnvVenvDir = "EAS_VENV_DIR"

// pythonWorker is how to start a python processor's worker processes.
type pythonWorker struct {
	command func(index int) *exec.Cmd
	needs   []string // what the workers read besides the package: allspark, the interpreter's prefix, the virtualenv
}

// pythonCommand prepares what a python processor needs (the allspark
// package on disk; a virtualenv when the package has requirements.txt) and
// returns how to start worker process i.
// With batch (a batch-inference model class), the worker is allspark's
// batchhost, which imports the entry as a module.
func pythonCommand(ctx context.Context, service, entry, pkgDir string, batch bool, log *slog.Logger) (*pythonWorker, error) {
	python := os.Getenv(EnvPython)
	if python == "" {
		python = "python3"
	}
	abs, err := exec.LookPath(python)
	if err != nil {
		return nil, fmt.Errorf("python processor: no Python interpreter %q: %v; install python3 or set %s", python, err, EnvPython)
	}
	lib, err := writeAllspark()
	if err != nil {
		return nil, fmt.Errorf("python processor: writing the allspark package: %w", err)
	}
	needs := []string{lib, pythonPrefix(abs)}
	if venv := filepath.Dir(filepath.Dir(abs)); fileExists(filepath.Join(venv, "pyvenv.cfg")) {
		// EAS_PYTHON is a virtualenv's interpreter: its python links to the
		// base installation (above), and its packages are below it.
		needs = append(needs, venv)
	}
	if req := filepath.Join(pkgDir, "requirements.txt"); fileExists(req) {
		if python, err = virtualenv(ctx, service, python, req, log); err != nil {
			return nil, err
		}
		needs = append(needs, filepath.Dir(filepath.Dir(python)))
	}
	return &pythonWorker{needs: needs, command: func(i int) *exec.Cmd {
		cmd := exec.Command(python, "-u", entry)
		if batch {
			cmd = exec.Command(python, "-u", "-m", "allspark.batchhost", entry)
		}
		cmd.Dir = pkgDir
		pythonPath := lib + string(os.PathListSeparator) + pkgDir
		cmd.Env = append(childEnv(),
			"PYTHONPATH="+pythonPath,
			"PYTHONDONTWRITEBYTECODE=1", // the package directory is the model cache's
			"EAS_WORKER_FD=3",
			"EAS_WORKER_INDEX="+strconv.Itoa(i))
		return cmd
	}}, nil
}

// pythonPrefix is the installation an interpreter belongs to (/usr for
// /usr/bin/python3, /opt/python3.12 for /opt/python3.12/bin/python3): its
// standard library and site-packages are below it.
func pythonPrefix(interpreter string) string {
	real, err := filepath.EvalSymlinks(interpreter)
	if err != nil {
		real = interpreter
	}
	return filepath.Dir(filepath.Dir(real))
}

// writeAllspark writes the embedded allspark package to a directory named
// by its content, once per machine, and returns the directory to put on
// PYTHONPATH.
func writeAllspark() (string, error) {
	h := sha256.New()
	files := embeddedPython()
	for _, f := range files {
		b, _ := allspark.ReadFile(f)
		h.Write([]byte(f))
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "eas-server-allspark-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fileExists(filepath.Join(dir, "allspark", "__init__.py")) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "eas-server-allspark-tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(f)), 0o755); err != nil {
			return "", err
		}
		b, _ := allspark.ReadFile(f)
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !fileExists(filepath.Join(dir, "allspark", "__init__.py")) {
		return "", err
	}
	return dir, nil
}

// virtualenv builds (once per interpreter and requirements.txt content) a
// virtualenv that sees the system's packages and holds the requirements,
// and returns its interpreter. pip reaches whatever index the server's
// environment names (PIP_INDEX_URL, PIP_FIND_LINKS, ...). The build runs
// the package's code (setup.py, build backends), so it runs inside the
// service's sandbox, writing only the new virtualenv; the finished one is
// handed to the server's uid, read-only to every worker.
func virtualenv(ctx context.Context, service, python, req string, log *slog.Logger) (string, error) {
	reqs, err := os.ReadFile(req)
	if err != nil {
		return "", err
	}
	abs, _ := exec.LookPath(python)
	sum := sha256.Sum256(append([]byte(abs+"\x00"), reqs...))
	root := os.Getenv(EnvVenvDir)
	if root == "" {
		// The user cache directory, else the temporary one (a pod's home
		// is often read-only; its /tmp is not).
		root = filepath.Join(os.TempDir(), "eas-server-venvs")
		if cache, err := os.UserCacheDir(); err == nil && os.MkdirAll(filepath.Join(cache, "eas-server", "venvs"), 0o755) == nil {
			root = filepath.Join(cache, "eas-server", "venvs")
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("requirements.txt: the virtualenv directory (set %s): %w", EnvVenvDir, err)
	}
	dir := filepath.Join(root, hex.EncodeToString(sum[:])[:16])
	venvPython := filepath.Join(dir, "bin", "python")
	done := filepath.Join(dir, ".eas-complete")
	// One build per directory, across services and server processes.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	if fileExists(done) {
		return venvPython, nil
	}
	os.RemoveAll(dir) // a build that was cut short
	log.Info("building a virtualenv for requirements.txt", "dir", dir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	need := []string{filepath.Dir(req), pythonPrefix(abs)}
	for _, l := range strings.Fields(os.Getenv("PIP_FIND_LINKS")) { // wheels pip is told to use
		if filepath.IsAbs(l) {
			need = append(need, l)
		}
	}
	sb, err := newSandbox(service, log, need, []string{dir})
	if err != nil {
		return "", fmt.Errorf("requirements.txt: %w", err)
	}
	defer sb.close()
	if sb.uid >= 0 {
		if err := os.Chown(dir, sb.uid, sb.gid); err != nil {
			return "", err
		}
	}
	run := func(what string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = filepath.Dir(req)
		cmd.Env = append(append(childEnv(), sb.env()...), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
		sb.launcher.Wrap(cmd, false)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(out.String())
			if len(msg) > 2000 {
				msg = "..." + msg[len(msg)-2000:]
			}
			return fmt.Errorf("requirements.txt: %s failed (%v): %s", what, err, msg)
		}
		return nil
	}
	if err := run("python -m venv", python, "-m", "venv", "--system-site-packages", dir); err != nil {
		return "", fmt.Errorf("%w; install Debian's python3-venv", err)
	}
	if err := run("pip install -r requirements.txt", venvPython, "-m", "pip", "install", "-r", req); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%w; pip needs a package index this machine reaches: set PIP_INDEX_URL (or PIP_FIND_LINKS with PIP_NO_INDEX=1 for wheels you provide) in the server's environment", err)
	}
	if sb.uid >= 0 {
		// The service's uid built it; the server owns it from now on, so no
		// worker (of this service or another sharing it) can change it.
		if err := chownTree(dir, os.Geteuid(), os.Getegid()); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("requirements.txt: taking over the virtualenv: %w", err)
		}
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", err
	}
	return venvPython, nil
}

// chownTree gives dir and everything in it to uid:gid (links themselves,
// not what they name).
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
