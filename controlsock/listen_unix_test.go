//go:build !windows

package controlsock

import (
	"os"
	"strings"
	"testing"
)

func TestListenPermissionsAndStaleSocket(t *testing.T) {
	h := newHarness(t, nil)
	fi, err := os.Stat(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	// A live server is never stolen.
	if _, err := Listen(h.path); err == nil || !strings.Contains(err.Error(), "another fleet") {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	// A regular file in the way is not removed.
	other := h.path + ".x"
	os.WriteFile(other, []byte("keep"), 0o600)
	if _, err := Listen(other); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
}
