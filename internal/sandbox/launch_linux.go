package sandbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// init is the launcher: a process started by Wrap applies the policy and
// becomes the worker here, before the program's own main (or TestMain)
// runs. It never returns in that case.
func init() {
	v, ok := os.LookupEnv(envLaunch)
	if !ok {
		return
	}
	// Landlock, no_new_privs and the parent-death signal belong to the
	// calling thread: everything from here to execve stays on this one.
	runtime.LockOSThread()
	err := launchWorker(v)
	fmt.Fprintf(os.Stderr, "eas-server sandbox: starting the worker: %v\n", err)
	os.Exit(126)
}

// Landlock access rights by ABI version.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fileRights are the rights that mean something on a file (a rule on a
	// file with any other is refused).
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right the kernel's ABI knows: all of them
// are denied unless a rule allows them.
func handledFS(abi int) uint64 {
	r := uint64(fsRightsV1)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Errorf("%w: %v", errNoLandlock, errno)
	}
	return int(v), nil
}

// launchWorker applies l and execve's the worker; it returns only on
// failure.
func launchWorker(v string) error {
	var l launch
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return fmt.Errorf("%s: %w", envLaunch, err)
	}
	env := withoutLaunch(os.Environ())
	ppid := os.Getppid()
	self := -1
	if l.Self {
		fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening this program: %w", err)
		}
		self = fd
	}
	// The rules' paths are opened with the server's rights, before the uid
	// changes.
	ruleset := -1
	if abi, _ := ABI(); abi >= 1 {
		fd, err := buildRuleset(abi, l.ReadOnly, l.ReadWrite)
		if err != nil {
			return err
		}
		ruleset = fd
	}
	if l.UID >= 0 {
		// syscall's Setgroups, Setgid and Setuid change every thread.
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(l.GID); err != nil {
			return fmt.Errorf("setgid %d: %w", l.GID, err)
		}
		if err := syscall.Setuid(l.UID); err != nil {
			return fmt.Errorf("setuid %d: %w", l.UID, err)
		}
	}
	if l.DropCaps {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	// A change of uid clears the parent-death signal: set it again, and
	// make sure the server did not die in between.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_PDEATHSIG: %w", err)
	}
	if os.Getppid() != ppid {
		return fmt.Errorf("the server (pid %d) is gone", ppid)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if ruleset >= 0 {
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
			return fmt.Errorf("landlock_restrict_self: %w", errno)
		}
		unix.Close(ruleset)
	}
	if self >= 0 {
		return execveat(self, l.Args, env)
	}
	return unix.Exec(l.Path, l.Args, env)
}

// buildRuleset makes a Landlock ruleset that handles every right the ABI
// knows, allows readOnly and readWrite, and (ABI 6) scopes signals and
// abstract Unix sockets.
func buildRuleset(abi int, readOnly, readWrite []string) (int, error) {
	handled := handledFS(abi)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	if abi >= 6 {
		// Signals, and abstract Unix sockets (a container runtime's shim
		// listens on one), reach only the worker's own domain.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	add := func(path string, rights uint64) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // a path this machine lacks (/lib32) allows nothing
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return fmt.Errorf("landlock rule %s: %w", path, err)
		}
		rights &= handled
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			rights &= fileRights
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(pfd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock rule %s: %w", path, errno)
		}
		return nil
	}
	for _, p := range readOnly {
		if err := add(p, readRights); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	for _, p := range readWrite {
		if err := add(p, handled); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	return int(fd), nil
}

// dropCapabilities leaves a root worker no capability, now or after
// execve: the bounding set, the ambient and inheritable sets and the
// current ones are emptied.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// execveat runs the program open as fd.
func execveat(fd int, argv, envv []string) error {
	argvp, err := cStrings(argv)
	if err != nil {
		return err
	}
	envp, err := cStrings(envv)
	if err != nil {
		return err
	}
	empty := []byte{0}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
	return fmt.Errorf("execveat: %w", errno)
}

func cStrings(ss []string) ([]*byte, error) {
	out := make([]*byte, 0, len(ss)+1)
	for _, s := range ss {
		p, err := unix.BytePtrFromString(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return append(out, nil), nil
}

// owner is a file's uid and gid.
func owner(st fs.FileInfo) (int, int) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), int(s.Gid)
	}
	return -1, -1
}
