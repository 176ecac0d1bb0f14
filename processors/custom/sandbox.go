package custom

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/eas-server/eas-server/internal/sandbox"
)

// workerSandbox is the trust boundary one custom processor's (or hook's)
// workers start inside (package sandbox): a uid of the service's own when
// the server is root, and a Landlock domain that may read the system, the
// package, the model and the runtime, write only the workers' own
// temporary directory, and signal nothing outside itself.
type workerSandbox struct {
	launcher *sandbox.Launcher
	tmp      string // HOME and TMPDIR of the workers, theirs alone
	uid, gid int    // -1: the server's (or root without capabilities)
}

// enforcedOnce logs, once per server process, what the workers get on this
// machine and what they do not.
var enforcedOnce sync.Once

// newWorkerSandbox prepares the boundary for service's workers, which must
// read (and may execute) need. When the server is root but a needed path is
// out of the service uid's reach (a 0700 directory above it), the workers
// stay root without capabilities, inside Landlock, and the log says why.
func newWorkerSandbox(service string, log *slog.Logger, need ...string) (*workerSandbox, error) {
	return newSandbox(service, log, need, nil)
}

// newSandbox is newWorkerSandbox with write: directories the processes may
// also write in (a virtualenv being built), which must be reachable too.
func newSandbox(service string, log *slog.Logger, need, write []string) (*workerSandbox, error) {
	uid, gid, err := sandbox.WorkerUID(service)
	if err != nil {
		return nil, err
	}
	need, write = clean(need), clean(write)
	if uid >= 0 {
		for _, p := range append(need, write...) {
			if err := sandbox.Reachable(p, uid, gid); err != nil {
				log.Warn("custom processor workers stay root (without capabilities, inside Landlock) instead of running as the service's own uid: a path they need is out of that uid's reach; make it readable by others (directories o+rx) to give them their own uid",
					"uid", uid, "path", p, "reason", err.Error())
				uid, gid = -1, -1
				break
			}
		}
	}
	gets, lacks := sandbox.Enforced(uid)
	enforcedOnce.Do(func() {
		if abi, _ := sandbox.ABI(); abi < 6 {
			log.Warn("custom processor workers are only partly isolated from the server on this machine (docs/custom-processors.md, Trust boundary)",
				"enforced", strings.Join(gets, ", "), "not_enforced", strings.Join(lacks, "; "))
			return
		}
		log.Info("custom processor workers run inside the trust boundary (docs/custom-processors.md)", "enforced", strings.Join(gets, ", "))
	})
	tmp, err := os.MkdirTemp("", "eas-worker-")
	if err != nil {
		return nil, fmt.Errorf("the workers' temporary directory: %w", err)
	}
	if uid >= 0 {
		if err := os.Chown(tmp, uid, gid); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("the workers' temporary directory: %w", err)
		}
	}
	ro, rw := sandbox.System()
	// Libraries a cpp processor finds through the server's
	// LD_LIBRARY_PATH.
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if filepath.IsAbs(d) {
			ro = append(ro, d)
		}
	}
	p := sandbox.Policy{ReadOnly: append(ro, need...), ReadWrite: append(append(rw, tmp), write...), UID: uid, GID: gid}
	if err := sandbox.CheckPolicy(p); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	l, err := sandbox.NewLauncher(p)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	log.Debug("custom processor worker sandbox", "enforced", strings.Join(gets, ", "), "not_enforced", strings.Join(lacks, "; "))
	return &workerSandbox{launcher: l, tmp: tmp, uid: uid, gid: gid}, nil
}

// env is what the workers' environment adds: their own HOME and TMPDIR.
func (s *workerSandbox) env() []string {
	return []string{"HOME=" + s.tmp, "TMPDIR=" + s.tmp}
}

// close removes the workers' temporary directory.
func (s *workerSandbox) close() {
	if s != nil {
		os.RemoveAll(s.tmp)
	}
}

// clean makes the paths absolute and drops the empty ones.
func clean(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out = append(out, p)
	}
	return out
}
