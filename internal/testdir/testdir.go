// Package testdir gives tests what the fleet keeps on disk in a place of
// their own: a fresh temporary directory with a short path, removed when
// the test ends, and a control socket path (a file in it on Unix, a named
// pipe on Windows).
package testdir

import (
	"os"
	"testing"
)

// New returns a fresh directory under os.TempDir with a short path (Unix
// socket paths under it fit sun_path), removed with everything in it when
// t ends; t fails if it cannot be removed. Unlike t.TempDir, the removal
// also works under Wine (see removeAll in testdir_windows.go).
func New(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeAll(dir); err != nil {
			t.Errorf("remove the test's directory: %v", err)
		}
	})
	return dir
}
