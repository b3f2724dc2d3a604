package registry

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

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

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "1-a.token")
	tok, err := WriteToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Errorf("token %q is not 64 hex chars", tok)
	}
	assertMode(t, path, 0o600)
	if got, err := ReadToken(path); err != nil || got != tok {
		t.Errorf("ReadToken = %q, %v; want %q", got, err, tok)
	}
	if _, err := WriteToken(path); err == nil {
		t.Error("WriteToken over an existing token succeeded")
	}
	if got, _ := ReadToken(path); got != tok {
		t.Error("failed WriteToken changed the token")
	}
	other, err := WriteToken(filepath.Join(dir, "2-a.token"))
	if err != nil || other == tok {
		t.Errorf("second token %q, %v", other, err)
	}

	// A dangling symlink is not followed on create.
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

	bad := []struct {
		name  string
		setup func(p string)
		want  string
	}{
		{"symlink", func(p string) {
			if err := os.Symlink(path, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"world-readable", func(p string) { writeFile(t, p, tok, 0o644) }, "has mode 0644"},
		{"group-writable", func(p string) { writeFile(t, p, tok, 0o620) }, "has mode 0620"},
		{"too large", func(p string) { writeFile(t, p, strings.Repeat("a", MaxTokenSize+1), 0o600) }, "over the limit of 4096 bytes"},
		{"empty", func(p string) { writeFile(t, p, " \n", 0o600) }, "is empty"},
		{"directory", func(p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"missing", func(string) {}, "no such file"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.token")
			tt.setup(p)
			_, err := ReadToken(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadToken = %v, want %q", err, tt.want)
			}
		})
	}

	p := filepath.Join(t.TempDir(), "ws.token")
	writeFile(t, p, "  "+tok+"\n", 0o600)
	if got, err := ReadToken(p); err != nil || got != tok {
		t.Errorf("ReadToken(whitespace) = %q, %v", got, err)
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
