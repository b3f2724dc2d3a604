//go:build !windows

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor names a fleet-home folder that lets others in, and how to fix it.
func TestCheckDirsNamesAnOpenFolder(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := checkDirs(home); len(got) != 0 {
		t.Fatalf("a private state folder: %q", got)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	got := checkDirs(home)
	if len(got) != 1 || !strings.Contains(got[0], state+" has mode 0755") || !strings.Contains(got[0], "chmod 700 "+state) {
		t.Fatalf("checkDirs = %q; want the state folder, its mode and the chmod", got)
	}
}
