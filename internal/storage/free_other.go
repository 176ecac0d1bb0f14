//go:build !unix

package storage

// freeBytes cannot tell on this system.
func freeBytes(string) int64 { return -1 }
