//go:build unix

package storage

import "syscall"

// freeBytes returns the bytes an unprivileged user may still write on the
// file system holding dir, or -1 when it cannot tell.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
