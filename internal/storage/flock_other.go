//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package storage

import "os"

// flock does nothing here: the cache is coordinated within one process
// only, as before locks existed.
func flock(*os.File, bool, bool) error { return nil }
