package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// StateLockFile is the file under a state dir whose lock says which
// server owns the directory.
const StateLockFile = "server.lock"

// StateLock is a server's exclusive hold on its state dir. Two servers on
// one state dir would each load the services, fight over their queue
// files and record each other's failures, so the second refuses to start
// before it writes anything. The lock is an advisory flock the kernel
// drops when the holder dies, so a crashed server never leaves the
// directory locked.
type StateLock struct{ f *os.File }

// LockStateDir takes dir's lock without waiting. When another process
// holds it, the error names that process's pid (which the holder wrote
// into the file) and the file, and nothing under dir has changed.
func LockStateDir(dir string) (*StateLock, error) {
	path := filepath.Join(dir, StateLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the state dir: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
			holder = fmt.Sprintf("another eas-server (pid %d)", pid)
		}
		return nil, fmt.Errorf("the state dir %s is in use by %s, which holds %s; stop it, or give this server another --state-dir", dir, holder, path)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the state dir: %w", err)
	}
	// Ours now: say who holds it, for the next server that tries.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the state dir: %w", err)
	}
	return &StateLock{f: f}, nil
}

// Release lets another server take the directory. The kernel does the same
// when the process ends.
func (l *StateLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
