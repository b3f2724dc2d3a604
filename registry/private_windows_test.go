//go:build windows

package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/testdir"
)

func TestEnsurePrivateDir(t *testing.T) {
	t.Run("creates parents user-only", func(t *testing.T) {
		dir := filepath.Join(testdir.New(t), "a", "b")
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatal(err)
		}
		assertPrivate(t, dir)
		assertPrivate(t, filepath.Dir(dir))
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatalf("again: %v", err)
		}
	})
	// Made with the folder's usual access, not by EnsurePrivateDir: its
	// access list is not rewritten, it is refused.
	t.Run("refuses a dir others can open", func(t *testing.T) {
		dir := filepath.Join(testdir.New(t), "d")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		grantEveryone(t, dir)
		err := EnsurePrivateDir(dir)
		if err == nil || !strings.Contains(err.Error(), "lets S-1-1-0") || !strings.Contains(err.Error(), "remove it") {
			t.Fatalf("EnsurePrivateDir = %v", err)
		}
	})
	t.Run("refuses a file", func(t *testing.T) {
		file := filepath.Join(testdir.New(t), "f")
		writePrivate(t, file, "")
		if err := EnsurePrivateDir(file); err == nil {
			t.Fatal("EnsurePrivateDir(file) succeeded")
		}
	})
}

// platformBadTokens are the tokens ReadToken refuses for what they are on
// Windows: files that let others in.
func platformBadTokens(t *testing.T, _, tok string) []badToken {
	return []badToken{
		{"Everyone can read", func(p string) {
			writePrivate(t, p, tok)
			grantEveryone(t, p)
		}, "lets S-1-1-0"},
	}
}
