package skill

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindListWrite(t *testing.T) {
	repo, home := t.TempDir(), t.TempDir()
	dirs := Dirs(repo, home)
	write := func(dir, name, content string) {
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(repo, ".fleet", "skills"), "test.md", "run the tests: {task}\n")
	write(filepath.Join(home, "skills"), "test.md", "the home copy\n")
	write(filepath.Join(home, "skills"), "docs.md", "write docs\n")
	write(filepath.Join(home, "skills"), "Bad Name.md", "ignored\n")
	write(filepath.Join(home, "skills"), "empty.md", "  \n")

	s, err := Find(dirs, "test")
	if err != nil || s.Content != "run the tests: {task}\n" || !strings.HasPrefix(s.Path, repo) {
		t.Fatalf("the repository's skill wins: %+v %v", s, err)
	}
	if _, err := Find(dirs, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing skill: %v", err)
	}
	for _, bad := range []string{"../x", "A", "", strings.Repeat("a", 65)} {
		if _, err := Find(dirs, bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("%q accepted: %v", bad, err)
		}
	}
	if _, err := Find(dirs, "empty"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty skill: %v", err)
	}
	var names []string
	for _, s := range List(dirs) {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "docs,test" {
		t.Fatalf("List: %v", names)
	}
	if err := Write(s.Path, "v2 {task}\n"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(s.Path)
	if got, _ := os.ReadFile(s.Path); string(got) != "v2 {task}\n" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("after Write: %q %v", got, fi.Mode())
	}
	big := strings.Repeat("x", MaxSize+1)
	if err := Write(s.Path, big); err == nil {
		t.Fatal("an oversized skill was written")
	}
	write(filepath.Join(home, "skills"), "huge.md", big)
	if _, err := Find(dirs, "huge"); err == nil {
		t.Fatal("an oversized skill was read")
	}
}
