//go:build unix

package registry

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noSuchFile is how the OS says a file is missing.
const noSuchFile = "no such file"

func TestEnsurePrivateDir(t *testing.T) {
	t.Run("creates parents 0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatal(err)
		}
		assertMode(t, dir, fs.ModeDir|0o700)
		assertMode(t, filepath.Dir(dir), fs.ModeDir|0o700)
	})
	t.Run("fixes a 0755 dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		chmod(t, dir, 0o755)
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatal(err)
		}
		assertMode(t, dir, fs.ModeDir|0o700)
	})
	t.Run("fixes a 0500 dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatal(err)
		}
		assertMode(t, dir, fs.ModeDir|0o700)
	})
	t.Run("refuses a symlink", func(t *testing.T) {
		real := filepath.Join(t.TempDir(), "real")
		if err := os.Mkdir(real, 0o755); err != nil {
			t.Fatal(err)
		}
		chmod(t, real, 0o755)
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		err := EnsurePrivateDir(link)
		if err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
			t.Fatalf("EnsurePrivateDir(symlink) = %v", err)
		}
		assertMode(t, real, fs.ModeDir|0o755) // untouched
	})
	t.Run("refuses a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := EnsurePrivateDir(file); err == nil {
			t.Fatal("EnsurePrivateDir(file) succeeded")
		}
	})
}

// A dangling symlink is not followed on create.
func TestWriteTokenThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link.token")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteToken(link); err == nil {
		t.Error("WriteToken through a symlink succeeded")
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("WriteToken created the symlink's target")
	}
}

// platformBadTokens are the tokens ReadToken refuses for what they are on
// Unix: a symlink to the good token at path, or a file with group or other
// bits.
func platformBadTokens(t *testing.T, path, tok string) []badToken {
	return []badToken{
		{"symlink", func(p string) {
			if err := os.Symlink(path, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"world-readable", func(p string) { writeFile(t, p, tok, 0o644) }, "has mode 0644"},
		{"group-writable", func(p string) { writeFile(t, p, tok, 0o620) }, "has mode 0620"},
	}
}

// writeFile writes content to p with exactly mode.
func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, p, mode)
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
