//go:build !unix

package store

import "os"

// writable reports whether path looks writable (only used to word an error;
// SQLite makes the real decision).
func writable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().Perm()&0o200 != 0
}
