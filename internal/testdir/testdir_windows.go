//go:build windows

package testdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// removeAll removes dir and what is in it, deepest first, one os.Remove at a
// time. os.RemoveAll (and so t.TempDir's cleanup) fails under Wine 8 with
// "unlinkat ...: Invalid function": Go 1.26 deletes with
// FILE_DISPOSITION_POSIX_SEMANTICS, which Wine lacks, while os.Remove of a
// file or an empty directory works there and on Windows alike.
func removeAll(dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// WalkDir visits a directory before what is in it.
	var errs []error
	for _, p := range slices.Backward(paths) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SocketPath returns a fresh name for a control socket (controlsock.Listen):
// a local named pipe. It lives as long as its listener, so there is nothing
// to remove.
func SocketPath(t testing.TB) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	return `\\.\pipe\agents-fleet-test-` + hex.EncodeToString(b[:])
}
