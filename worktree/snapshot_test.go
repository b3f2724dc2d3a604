package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// around snapshots dir, runs f (the "command"), snapshots again and returns
// Diff and Changes of the two.
func around(t *testing.T, dir string, f func()) (diff, changes []Change) {
	t.Helper()
	before, err := TakeSnapshot(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	f()
	after, err := TakeSnapshot(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	changes, err = Changes(t.Context(), before, after)
	if err != nil {
		t.Fatal(err)
	}
	return DiffSnapshots(before, after), changes
}

func TestDiff(t *testing.T) {
	base := map[string]string{
		"a.txt":      "alpha\n",
		"b.txt":      "bravo\n",
		"dir/c.txt":  "charlie\n",
		".gitignore": "*.log\nbuild/\n",
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // before the first snapshot
		cmd   func(t *testing.T, dir string)
		want  []Change
	}{
		{
			name: "untracked file created",
			cmd:  func(t *testing.T, dir string) { writeFile(t, dir, "new.txt", "n\n") },
			want: []Change{{"new.txt", Created}},
		},
		{
			name: "file created and added",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "new.txt", "n\n")
				git(t, dir, "add", "new.txt")
			},
			want: []Change{{"new.txt", Created}},
		},
		{
			name: "tracked file edited",
			cmd:  func(t *testing.T, dir string) { writeFile(t, dir, "dir/c.txt", "changed\n") },
			want: []Change{{"dir/c.txt", Edited}},
		},
		{
			name: "tracked file deleted",
			cmd:  func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "a.txt")) },
			want: []Change{{"a.txt", Deleted}},
		},
		{
			name:  "untracked file deleted",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "scratch.txt", "s\n") },
			cmd:   func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "scratch.txt")) },
			want:  []Change{{"scratch.txt", Deleted}},
		},
		{
			name:  "untracked file edited",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "scratch.txt", "s\n") },
			cmd:   func(t *testing.T, dir string) { writeFile(t, dir, "scratch.txt", "more\n") },
			want:  []Change{{"scratch.txt", Edited}},
		},
		{
			name: "dirty file edited again, same size and mtime",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "a.txt", "first!\n")
				mtime := time.Now().Truncate(time.Second)
				os.Chtimes(filepath.Join(dir, "a.txt"), mtime, mtime)
			},
			cmd: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "a.txt")
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, "a.txt", "again!\n")
				os.Chtimes(p, fi.ModTime(), fi.ModTime())
			},
			want: []Change{{"a.txt", Edited}},
		},
		{
			name: "untouched dirty files",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "a.txt", "modified\n")
				writeFile(t, dir, "scratch.txt", "s\n")
				os.Remove(filepath.Join(dir, "b.txt"))
				writeFile(t, dir, "staged.txt", "st\n")
				git(t, dir, "add", "staged.txt")
			},
			cmd:  func(t *testing.T, dir string) {},
			want: nil,
		},
		{
			name:  "modified file restored to HEAD",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "a.txt", "modified\n") },
			cmd:   func(t *testing.T, dir string) { git(t, dir, "checkout", "--", "a.txt") },
			want:  []Change{{"a.txt", Edited}},
		},
		{
			name:  "deleted file restored",
			setup: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "b.txt")) },
			cmd:   func(t *testing.T, dir string) { git(t, dir, "checkout", "--", "b.txt") },
			want:  []Change{{"b.txt", Created}},
		},
		{
			name: "untracked file created and removed within the command",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "tmp.txt", "t\n")
				os.Remove(filepath.Join(dir, "tmp.txt"))
			},
			want: nil,
		},
		{
			name: "tracked file edited and reverted within the command",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "a.txt", "temporary\n")
				writeFile(t, dir, "a.txt", "alpha\n")
			},
			want: nil,
		},
		{
			name: "gitignored files",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "debug.log", "x\n")
				writeFile(t, dir, "build/out/bin", "x\n")
			},
			want: nil,
		},
		{
			name: "paths with spaces, unicode and newlines",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "with space/fïlé ü.txt", "1\n")
				writeFile(t, dir, "日本語.md", "2\n")
				if runtime.GOOS != "windows" {
					writeFile(t, dir, "new\nline \"quoted\".txt", "3\n")
				}
			},
			want: func() []Change {
				var c []Change
				if runtime.GOOS != "windows" {
					c = append(c, Change{"new\nline \"quoted\".txt", Created})
				}
				return append(c, Change{"with space/fïlé ü.txt", Created}, Change{"日本語.md", Created})
			}(),
		},
		{
			name: "nested new directory of files",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "pkg/x/one.go", "1\n")
				writeFile(t, dir, "pkg/x/y/two.go", "2\n")
				writeFile(t, dir, "pkg/three.go", "3\n")
			},
			want: []Change{{"pkg/three.go", Created}, {"pkg/x/one.go", Created}, {"pkg/x/y/two.go", Created}},
		},
		{
			name: "file replaced by a directory",
			cmd: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "b.txt"))
				writeFile(t, dir, "b.txt/inner.txt", "i\n")
			},
			want: []Change{{"b.txt", Deleted}, {"b.txt/inner.txt", Created}},
		},
		{
			name: "file only removed from the index",
			cmd:  func(t *testing.T, dir string) { git(t, dir, "rm", "-q", "--cached", "a.txt") },
			want: nil,
		},
		{
			name: "staged change, work tree restored to HEAD",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "a.txt", "staged\n")
				git(t, dir, "add", "a.txt")
				writeFile(t, dir, "a.txt", "alpha\n")
			},
			want: nil,
		},
	}
	if runtime.GOOS != "windows" {
		tests = append(tests,
			struct {
				name  string
				setup func(t *testing.T, dir string)
				cmd   func(t *testing.T, dir string)
				want  []Change
			}{
				name: "executable bit",
				cmd:  func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "a.txt"), 0o755) },
				want: []Change{{"a.txt", Edited}},
			},
			struct {
				name  string
				setup func(t *testing.T, dir string)
				cmd   func(t *testing.T, dir string)
				want  []Change
			}{
				name:  "symlink created and retargeted",
				setup: func(t *testing.T, dir string) { os.Symlink("a.txt", filepath.Join(dir, "old-link")) },
				cmd: func(t *testing.T, dir string) {
					os.Symlink("b.txt", filepath.Join(dir, "new-link"))
					os.Remove(filepath.Join(dir, "old-link"))
					os.Symlink("b.txt", filepath.Join(dir, "old-link"))
				},
				want: []Change{{"new-link", Created}, {"old-link", Edited}},
			},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t, base)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			diff, changes := around(t, dir, func() { tt.cmd(t, dir) })
			if !slices.Equal(diff, tt.want) {
				t.Errorf("Diff = %q, want %q", diff, tt.want)
			}
			if !slices.Equal(changes, tt.want) {
				t.Errorf("Changes = %q, want %q", changes, tt.want)
			}
		})
	}
}

// Commands that move HEAD: Changes sees through them, Diff does not.
func TestChangesAcrossCommits(t *testing.T) {
	base := map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n", "c.txt": "charlie\n"}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		cmd   func(t *testing.T, dir string)
		want  []Change
	}{
		{
			name:  "commit of an earlier edit",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "a.txt", "edited earlier\n") },
			cmd:   func(t *testing.T, dir string) { git(t, dir, "commit", "-q", "-am", "x") },
			want:  nil,
		},
		{
			name: "edit, create and delete, all committed",
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "b.txt", "changed\n")
				writeFile(t, dir, "new.txt", "n\n")
				os.Remove(filepath.Join(dir, "c.txt"))
				git(t, dir, "add", "-A")
				git(t, dir, "commit", "-q", "-m", "x")
			},
			want: []Change{{"b.txt", Edited}, {"c.txt", Deleted}, {"new.txt", Created}},
		},
		{
			name:  "earlier edit committed, then edited again",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "a.txt", "v1\n") },
			cmd: func(t *testing.T, dir string) {
				git(t, dir, "commit", "-q", "-am", "x")
				writeFile(t, dir, "a.txt", "v2\n")
			},
			want: []Change{{"a.txt", Edited}},
		},
		{
			name:  "dirty file left alone while another is committed",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "a.txt", "dirty\n") },
			cmd: func(t *testing.T, dir string) {
				writeFile(t, dir, "b.txt", "committed\n")
				git(t, dir, "commit", "-q", "-m", "x", "b.txt")
			},
			want: []Change{{"b.txt", Edited}},
		},
		{
			name: "hard reset to an older commit",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "b.txt", "second\n")
				git(t, dir, "commit", "-q", "-am", "second")
			},
			cmd:  func(t *testing.T, dir string) { git(t, dir, "reset", "-q", "--hard", "HEAD~1") },
			want: []Change{{"b.txt", Edited}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := newRepo(t, base)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			_, changes := around(t, dir, func() { tt.cmd(t, dir) })
			if !slices.Equal(changes, tt.want) {
				t.Errorf("Changes = %q, want %q", changes, tt.want)
			}
		})
	}
}

func TestSnapshotInWorktreeAndSubdir(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, repo, "a.txt", "main tree edit\n") // not the worktree's business
	before, err := TakeSnapshot(t.Context(), filepath.Join(wt.Path, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if before.Dir() != wt.Path || before.Head() != m.Head() || before.Len() != 0 {
		t.Errorf("snapshot of a clean worktree subdir: dir %s head %s len %d", before.Dir(), before.Head(), before.Len())
	}
	writeFile(t, wt.Path, "sub/b.txt", "edited\n")
	after, err := TakeSnapshot(t.Context(), wt.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := DiffSnapshots(before, after), []Change{{"sub/b.txt", Edited}}; !slices.Equal(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
}

func TestSnapshotOutsideRepo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	if _, err := TakeSnapshot(t.Context(), dir); !errors.Is(err, ErrNotRepo) {
		t.Fatalf("TakeSnapshot outside a repository: %v, want ErrNotRepo", err)
	}
}

func TestSnapshotUnbornBranch(t *testing.T) {
	dir := newRepo(t, nil)
	diff, changes := around(t, dir, func() { writeFile(t, dir, "first.txt", "1\n") })
	want := []Change{{"first.txt", Created}}
	if !slices.Equal(diff, want) || !slices.Equal(changes, want) {
		t.Errorf("Diff = %v, Changes = %v, want %v", diff, changes, want)
	}
	// The first commit moves HEAD from nothing: the committed file did not change.
	_, changes = around(t, dir, func() {
		git(t, dir, "add", "first.txt")
		git(t, dir, "commit", "-q", "-m", "first")
	})
	if len(changes) != 0 {
		t.Errorf("Changes across the first commit = %v, want none", changes)
	}
}

func BenchmarkTakeSnapshot(b *testing.B) {
	files := map[string]string{}
	for i := range 2000 {
		files[fmt.Sprintf("pkg%02d/file%04d.go", i/100, i)] = fmt.Sprintf("package pkg\n\n// file %d\nvar X%d = %d\n", i, i, i)
	}
	dir := newRepo(b, files)
	for i := range 20 {
		writeFile(b, dir, fmt.Sprintf("pkg%02d/file%04d.go", i, i*100), "package pkg\n// dirty\n")
	}
	s, err := TakeSnapshot(b.Context(), dir)
	if err != nil {
		b.Fatal(err)
	}
	if s.Len() != 20 {
		b.Fatalf("snapshot holds %d paths, want 20", s.Len())
	}
	for b.Loop() {
		if _, err := TakeSnapshot(b.Context(), dir); err != nil {
			b.Fatal(err)
		}
	}
}
