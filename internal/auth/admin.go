package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AdminTokenEnv names the environment variable that sets the control-plane
// admin token; it takes precedence over the token file in the state dir.
const AdminTokenEnv = "EAS_ADMIN_TOKEN"

// AdminTokenFile is the name of the admin token file inside the state dir.
const AdminTokenFile = "admin_token"

// LoadOrCreateAdminToken returns the control-plane admin token. The
// EAS_ADMIN_TOKEN environment variable wins; otherwise the token is read
// from <stateDir>/admin_token; otherwise a new token is generated and written
// there with mode 0600. created reports the last case, so that the caller
// prints the new token once (and only then).
//
// The file is written to a temporary name, synced, and then linked into
// place, so a crash never leaves a partial token and two processes starting
// at once agree on one token: the loser reads the winner's file.
func LoadOrCreateAdminToken(stateDir string) (token string, created bool, err error) {
	if v := strings.TrimSpace(os.Getenv(AdminTokenEnv)); v != "" {
		return v, false, nil
	}
	path := filepath.Join(stateDir, AdminTokenFile)
	tok, err := readAdminToken(path)
	if err == nil {
		return tok, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}

	tok, err = GenerateToken()
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", false, fmt.Errorf("create state dir %s: %w", stateDir, err)
	}
	won, err := writeNew(path, []byte(tok+"\n"))
	if err != nil {
		return "", false, err
	}
	if !won {
		// Another process created the file between our read and our write.
		tok, err = readAdminToken(path)
		return tok, false, err
	}
	return tok, true, nil
}

func readAdminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	// The token is the server's alone (mode 0600), whoever wrote the file:
	// a custom processor's worker running as another uid must not read it.
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, st.Mode().Perm()&0o600); err != nil {
			return "", fmt.Errorf("read admin token: %s is readable by others (mode %04o) and could not be made 0600: %w", path, st.Mode().Perm(), err)
		}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read admin token: %s is empty; delete it to generate a new token or set %s", path, AdminTokenEnv)
	}
	return tok, nil
}

// writeNew creates path with data and mode 0600 unless path already exists,
// in which case it returns false. The data is fsynced before it becomes
// visible under path, and the directory is fsynced after.
func writeNew(path string, data []byte) (created bool, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("write admin token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful link or rename this is a no-op or removes the extra name
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return false, fmt.Errorf("write admin token: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("write admin token: %w", err)
	}

	// A hard link never replaces an existing file, unlike rename. Filesystems
	// without hard links fall back to rename, which is still atomic.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, fmt.Errorf("write admin token: %w", err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		// Sync the directory so the new name survives a crash; some
		// filesystems refuse to sync directories, which is not fatal.
		_ = d.Sync()
		d.Close()
	}
	return true, nil
}
