// Package sandbox is the trust boundary around user code (custom
// processors and their pre_process/post_process hooks): a worker process
// started through a Launcher cannot read the server's state directory,
// tokens or credentials, and cannot signal the server or other services'
// workers.
//
// Two mechanisms, each applied where the machine allows it:
//
//   - A separate uid and gid (Policy.UID, Policy.GID), when the server runs
//     as root: the worker then has no capabilities, cannot read the server's
//     0600/0700 files and cannot signal processes of another uid.
//   - Landlock (Linux 5.13 and later, when the LSM is enabled): a
//     filesystem allow-list (Policy.ReadOnly, Policy.ReadWrite; everything
//     else, the state directory included, is denied) and, from Landlock ABI
//     6 (Linux 6.12), scoping: the worker cannot signal any process outside
//     its own Landlock domain (the server, other workers), nor connect to
//     an abstract Unix socket one of them listens on. Landlock
//     also denies ptrace, and so /proc/<pid>/environ, mem, fd and cwd, of
//     processes outside the domain.
//
// Launcher.Wrap turns a command into one that starts this program again
// in launcher mode (the package's init, keyed by an environment variable):
// still with the server's privileges it opens what it must, drops to the uid,
// sets no_new_privs, enters the Landlock domain and execve's the real
// worker, so the whole worker, every thread and every child, starts inside
// the boundary. Landlock restricts only the calling thread, which is why
// the restriction is applied on a locked thread just before execve rather
// than in a running multi-threaded worker.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// envLaunch carries the launcher's instructions (JSON) to the re-executed
// program; it never reaches the worker.
const envLaunch = "EAS_SANDBOX_LAUNCH"

// EnvWorkerUID chooses the uid workers run as when the server runs as
// root: unset or "auto", a uid per service in [UIDBase, UIDBase+UIDCount);
// a number, that uid (and gid) for every worker; "0", root without
// capabilities (Landlock alone).
const EnvWorkerUID = "EAS_WORKER_UID"

// The range per-service uids are drawn from: above the usual system and
// login accounts, the span container runtimes give their first subordinate
// ids.
const (
	UIDBase  = 100000
	UIDCount = 65536
)

// Policy is what a worker may touch.
type Policy struct {
	// ReadOnly are files and hierarchies the worker may read and execute.
	ReadOnly []string
	// ReadWrite are hierarchies it may also write, create and remove in.
	ReadWrite []string
	// UID and GID are what the worker runs as; -1 keeps the server's.
	UID, GID int
}

// launch is what the launcher is told.
type launch struct {
	Path      string   // the program to run
	Args      []string // its argv, argv[0] included
	ReadOnly  []string
	ReadWrite []string
	UID, GID  int
	// Self executes this program's own file through a descriptor opened
	// before the uid is dropped: the binary may sit where the worker's uid
	// cannot reach it (a root home, a go test's 0700 build directory).
	Self bool
	// DropCaps empties the capability sets of a worker that stays root.
	DropCaps bool
}

// Launcher starts commands under one policy.
type Launcher struct {
	exe string // this program
	p   Policy
}

// NewLauncher prepares to start workers under p.
func NewLauncher(p Policy) (*Launcher, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: finding this program to launch the worker: %w", err)
	}
	return &Launcher{exe: exe, p: p}, nil
}

// Policy is the policy l applies.
func (l *Launcher) Policy() Policy { return l.p }

// Wrap makes cmd start under the policy: cmd's program, arguments and
// environment are kept, but the process is this executable in launcher
// mode, which applies the policy and then execve's them. cmd.Dir,
// ExtraFiles and SysProcAttr stay the caller's (the directory is entered
// with the server's rights, before the uid changes). self says that cmd
// runs this executable itself (a cpp worker): it is then executed through a
// descriptor opened before the uid changes.
func (l *Launcher) Wrap(cmd *exec.Cmd, self bool) {
	p := l.p
	x := launch{Path: cmd.Path, Args: cmd.Args, ReadOnly: p.ReadOnly, ReadWrite: p.ReadWrite,
		UID: p.UID, GID: p.GID, Self: self, DropCaps: os.Geteuid() == 0 && p.UID <= 0}
	if x.UID < 0 {
		x.GID = -1
	}
	if self { // execveat needs Landlock's execute right on the file
		x.ReadOnly = append(x.ReadOnly[:len(x.ReadOnly):len(x.ReadOnly)], l.exe)
	}
	b, _ := json.Marshal(x) // strings and ints only
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Path = l.exe
	cmd.Args = []string{l.exe}
	cmd.Env = append(withoutLaunch(env), envLaunch+"="+string(b))
}

func withoutLaunch(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, envLaunch+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// WorkerUID is the uid and gid a service's workers run as (EnvWorkerUID):
// -1, -1 (keep the server's) when the server is not root, since only root
// can change uid, or when EAS_WORKER_UID is "0". The error is a malformed
// EAS_WORKER_UID.
func WorkerUID(service string) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return -1, -1, nil
	}
	switch v := strings.TrimSpace(os.Getenv(EnvWorkerUID)); v {
	case "", "auto":
		h := fnv.New32a()
		h.Write([]byte(service))
		id := UIDBase + int(h.Sum32()%UIDCount)
		return id, id, nil
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<31-2 {
			return -1, -1, fmt.Errorf("%s=%q: want auto, a uid, or 0 to keep workers root (without capabilities)", EnvWorkerUID, v)
		}
		if n == 0 {
			return -1, -1, nil
		}
		return n, n, nil
	}
}

// Reachable says whether uid/gid (with no supplementary groups) may reach
// path and read it: search permission on every directory above it, and
// read (and search, for a directory) on path itself. Root's view of the
// modes is used; ACLs are not consulted.
func Reachable(path string, uid, gid int) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	for _, p := range []string{abs, real} {
		dir := filepath.Dir(p)
		for {
			if err := permits(dir, uid, gid, 1); err != nil {
				return err
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
	}
	st, err := os.Stat(real)
	if err != nil {
		return err
	}
	want := uint32(4)
	if st.IsDir() {
		want = 5
	}
	return permits(real, uid, gid, want)
}

// permits checks the mode bits of path for uid/gid against want (4 read,
// 1 search).
func permits(path string, uid, gid int, want uint32) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	uidOf, gidOf := owner(st)
	mode := uint32(st.Mode().Perm())
	var bits uint32
	switch {
	case uidOf == uid:
		bits = mode >> 6 & 7
	case gidOf == gid:
		bits = mode >> 3 & 7
	default:
		bits = mode & 7
	}
	if bits&want != want {
		return fmt.Errorf("%s (mode %04o, owner %d:%d) is not %s by uid %d", path, mode, uidOf, gidOf, map[uint32]string{1: "searchable", 4: "readable", 5: "readable and searchable"}[want], uid)
	}
	return nil
}

// ABI is the Landlock ABI version this kernel offers; 0 when it has none
// (too old, or the LSM is not enabled) and why.
func ABI() (int, error) {
	abiOnce.Do(func() { abiVersion, abiErr = landlockABI() })
	return abiVersion, abiErr
}

var (
	abiOnce    sync.Once
	abiVersion int
	abiErr     error
)

// Enforced describes, for a log line or an error, what a worker started
// with uid under this kernel gets and what it does not.
func Enforced(uid int) (gets, lacks []string) {
	abi, _ := ABI()
	if uid >= 0 {
		gets = append(gets, "uid "+strconv.Itoa(uid))
	} else if os.Geteuid() == 0 {
		gets = append(gets, "root without capabilities")
	} else {
		lacks = append(lacks, "a separate uid (the server is not root)")
	}
	switch {
	case abi >= 6:
		gets = append(gets, "Landlock filesystem allow-list", "Landlock signal scoping")
	case abi >= 1:
		gets = append(gets, "Landlock filesystem allow-list")
		lacks = append(lacks, "Landlock signal scoping (needs Landlock ABI 6, Linux 6.12)")
	default:
		lacks = append(lacks, "Landlock (the kernel has none, or the LSM is not enabled)")
	}
	return gets, lacks
}

// errNoLandlock is returned when the kernel offers no Landlock.
var errNoLandlock = errors.New("landlock unavailable")

// System is the part of every worker's policy that is the machine's, not
// the service's: programs, libraries and configuration read-only, /proc and
// /sys read-only (Landlock keeps other domains' /proc/<pid> entries that
// need ptrace rights, such as environ, out of reach), and the devices
// user code commonly opens (the null and random devices, /dev/shm, GPUs).
// The state directory must not live under one of these.
func System() (readOnly, readWrite []string) {
	readOnly = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys"}
	// /etc/resolv.conf is often a link to /run (systemd-resolved).
	if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !under(t, readOnly) {
		readOnly = append(readOnly, t)
	}
	readWrite = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm", "/dev/dri"}
	gpus, _ := filepath.Glob("/dev/nvidia*")
	readWrite = append(readWrite, gpus...)
	return readOnly, readWrite
}

// under says whether p is one of roots or inside one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// Contains reports the first of paths that is dir or holds it: a rule on
// it would open dir to the worker.
func Contains(paths []string, dir string) (string, bool) {
	dir = filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	for _, p := range paths {
		c := filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(c); err == nil {
			c = r
		}
		if under(dir, []string{c}) {
			return p, true
		}
	}
	return "", false
}

var (
	protectedMu sync.Mutex
	protected   []string
)

// Protect names a directory no worker may be given: the server's state
// directory. A policy whose paths hold it is refused (CheckPolicy).
func Protect(dir string) {
	if dir == "" {
		return
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	protectedMu.Lock()
	defer protectedMu.Unlock()
	protected = append(protected, dir)
}

// CheckPolicy refuses a policy that would open a protected directory to
// the worker.
func CheckPolicy(p Policy) error {
	protectedMu.Lock()
	dirs := append([]string(nil), protected...)
	protectedMu.Unlock()
	all := append(append([]string(nil), p.ReadOnly...), p.ReadWrite...)
	for _, d := range dirs {
		if path, ok := Contains(all, d); ok {
			return fmt.Errorf("%s holds the server's state directory %s: the worker would see its tokens; keep packages and models outside it", path, d)
		}
	}
	return nil
}
