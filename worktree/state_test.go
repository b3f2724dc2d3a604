package worktree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// newWorker makes a repository on main with files committed, a manager for
// session s and worker w1's worktree.
func newWorker(t *testing.T, files map[string]string) (repo string, m *Manager, wt Worktree) {
	t.Helper()
	repo = newRepo(t, files)
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	if wt, err = m.Create(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	return repo, m, wt
}

// commitFiles writes files in dir, commits everything with msg and returns
// the commit.
func commitFiles(t *testing.T, dir, msg string, files map[string]string) string {
	t.Helper()
	for rel, content := range files {
		writeFile(t, dir, rel, content)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", msg)
	return git(t, dir, "rev-parse", "HEAD")
}

// treeImage is everything of a work tree a landing must leave alone when it
// refuses: every file's bytes (the .git file or directory excepted), the
// index's bytes, git status and HEAD.
type treeImage struct {
	files               map[string]string
	index, status, head string
}

func imageOf(t *testing.T, dir string) treeImage {
	t.Helper()
	img := treeImage{files: map[string]string{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		img.files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	index := git(t, dir, "rev-parse", "--git-path", "index")
	if !filepath.IsAbs(index) {
		index = filepath.Join(dir, index)
	}
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	img.index = hex.EncodeToString(sum[:])
	img.status = git(t, dir, "--no-optional-locks", "status", "--porcelain", "--untracked-files=all")
	img.head = git(t, dir, "rev-parse", "HEAD")
	return img
}

func (a treeImage) equal(b treeImage) bool {
	return fmt.Sprint(a.files) == fmt.Sprint(b.files) && a.index == b.index && a.status == b.status && a.head == b.head
}

func readState(t *testing.T, repo string, wt Worktree) State {
	t.Helper()
	st, err := ReadState(t.Context(), repo, wt.Branch, wt.Path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

func fileStats(st State) string {
	var parts []string
	for _, f := range st.Files {
		parts = append(parts, fmt.Sprintf("%s %s +%d -%d bin=%v", f.Path, f.Status, f.Added, f.Removed, f.Binary))
	}
	return strings.Join(parts, "; ")
}

func TestCreateRecordsBase(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	if m.BaseBranch() != "main" || wt.BaseBranch != "main" || wt.BaseCommit != m.Head() {
		t.Fatalf("BaseBranch %q, Worktree %+v; want main at %s", m.BaseBranch(), wt, m.Head())
	}
	if got := git(t, repo, "config", "branch.fleet/s/w1.fleetBase"); got != "main" {
		t.Errorf("fleetBase = %q", got)
	}
	if got := git(t, repo, "config", "branch.fleet/s/w1.fleetStart"); got != m.Head() {
		t.Errorf("fleetStart = %q, want %s", got, m.Head())
	}

	// A resumed worktree reads them back, even after the main work tree
	// switched branches.
	git(t, repo, "switch", "-q", "-c", "other")
	m2, err := Open(t.Context(), repo, m.Root(), "s")
	if err != nil {
		t.Fatal(err)
	}
	again, err := m2.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Resumed || again.BaseBranch != "main" || again.BaseCommit != m.Head() {
		t.Errorf("resumed = %+v, want base main at %s", again, m.Head())
	}

	// A branch made before the fleet recorded metadata gets the manager's.
	git(t, repo, "config", "--unset", "branch.fleet/s/w1.fleetBase")
	git(t, repo, "config", "--unset", "branch.fleet/s/w1.fleetStart")
	if again, err = m2.Create(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	if again.BaseBranch != "other" || git(t, repo, "config", "branch.fleet/s/w1.fleetBase") != "other" ||
		git(t, repo, "config", "branch.fleet/s/w1.fleetStart") != m.Head() {
		t.Errorf("legacy branch: BaseBranch %q, config %q", again.BaseBranch, git(t, repo, "config", "--get-regexp", "fleet"))
	}

	// A detached HEAD has no base branch: only the start is recorded.
	git(t, repo, "switch", "-q", "--detach", "main")
	m3, err := Open(t.Context(), repo, m.Root(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if m3.BaseBranch() != "" {
		t.Errorf("BaseBranch with a detached HEAD = %q", m3.BaseBranch())
	}
	w2, err := m3.Create(t.Context(), "w2")
	if err != nil {
		t.Fatal(err)
	}
	if w2.BaseBranch != "" || git(t, repo, "config", "--get-regexp", `branch\.fleet/s/w2\.`) != "branch.fleet/s/w2.fleetstart "+m.Head() {
		t.Errorf("detached: BaseBranch %q, config %q", w2.BaseBranch, git(t, repo, "config", "--get-regexp", `branch\.fleet/s/w2\.`))
	}
	st := readState(t, repo, w2)
	if st.BaseBranch != "" || st.BaseCommit != m.Head() || st.Mergeable != nil {
		t.Errorf("state without a base branch = %+v", st)
	}

	// Deleting the branch deletes its metadata.
	if err := m3.Remove(t.Context(), "w2", RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := runGit(t.Context(), repo, "config", "--get-regexp", `branch\.fleet/s/w2\.`); err == nil {
		t.Errorf("metadata survived the branch: %s", out)
	}
}

func TestStateLifecycle(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "one\ntwo\n", "b.txt": "b\n"})

	st := readState(t, repo, wt)
	want := State{Branch: "fleet/s/w1", Head: m.Head(), BaseBranch: "main", BaseCommit: m.Head()}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("clean start: %+v, want %+v", st, want)
	}

	// Uncommitted work shows, and reading it changes nothing in the worktree.
	writeFile(t, wt.Path, "a.txt", "one\n2\n")
	writeFile(t, wt.Path, "dir/new.txt", "n\nn\n")
	before := imageOf(t, wt.Path)
	st = readState(t, repo, wt)
	if after := imageOf(t, wt.Path); !before.equal(after) {
		t.Errorf("ReadState changed the worktree: %+v -> %+v", before, after)
	}
	if st.Head != m.Head() || st.Uncommitted != 2 || st.Ahead != 0 || !isTrue(st.Mergeable) || st.Merged {
		t.Errorf("uncommitted: %+v", st)
	}
	if got, want := fileStats(st), "a.txt modified +1 -1 bin=false; dir/new.txt added +2 -0 bin=false"; got != want {
		t.Errorf("uncommitted files: %s, want %s", got, want)
	}
	if st.FilesTotal != 2 || st.Added != 3 || st.Removed != 1 {
		t.Errorf("totals: %d files +%d -%d", st.FilesTotal, st.Added, st.Removed)
	}

	// Committed, the same change is one commit ahead.
	tip := commitFiles(t, wt.Path, "work", nil)
	st = readState(t, repo, wt)
	if st.Head != tip || st.Ahead != 1 || st.Behind != 0 || st.Uncommitted != 0 || st.FilesTotal != 2 || !isTrue(st.Mergeable) {
		t.Errorf("committed: %+v", st)
	}

	// The base branch changes the same line: no longer mergeable.
	commitFiles(t, repo, "main edits a", map[string]string{"a.txt": "one\nTWO\n"})
	st = readState(t, repo, wt)
	if !isFalse(st.Mergeable) || !slices.Equal(st.Conflicts, []string{"a.txt"}) || st.Behind != 1 || st.Ahead != 1 {
		t.Errorf("conflicting base: %+v", st)
	}
	if st.BaseCommit != m.Head() || st.FilesTotal != 2 {
		t.Errorf("conflicting base moved the base commit or the files: %+v", st)
	}

	// An unrelated commit on the base branch only counts.
	commitFiles(t, repo, "main adds c", map[string]string{"c.txt": "c\n"})
	st = readState(t, repo, wt)
	if st.Behind != 2 || st.Ahead != 1 || !isFalse(st.Mergeable) {
		t.Errorf("unrelated base commit: %+v", st)
	}

	// Resolving by editing the worker's file back: uncommitted work counts
	// in the merge check too.
	writeFile(t, wt.Path, "a.txt", "one\nTWO\n")
	st = readState(t, repo, wt)
	if !isTrue(st.Mergeable) || len(st.Conflicts) != 0 || st.Uncommitted != 1 {
		t.Errorf("resolved in the worktree: %+v", st)
	}
}

func TestStateMergedByHand(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	git(t, repo, "merge", "-q", "--ff-only", wt.Branch)
	st := readState(t, repo, wt)
	if !st.Merged || st.MergedInto != "main" || st.Ahead != 0 || st.Mergeable != nil || st.FilesTotal != 0 {
		t.Errorf("fast-forwarded by hand: %+v", st)
	}
	writeFile(t, wt.Path, "more.txt", "m\n")
	if st = readState(t, repo, wt); st.Merged || !isTrue(st.Mergeable) || st.FilesTotal != 1 {
		t.Errorf("merged, then more uncommitted work: %+v", st)
	}
}

func TestStateMissingWorktree(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	writeFile(t, wt.Path, "lost.txt", "uncommitted\n")
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{wt.Path, ""} {
		st, err := ReadState(t.Context(), repo, wt.Branch, path)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Missing || st.Head != tip || st.BaseCommit != m.Head() || st.Ahead != 1 || st.Uncommitted != 0 ||
			fileStats(st) != "b.txt added +1 -0 bin=false" || !isTrue(st.Mergeable) {
			t.Errorf("ReadState(path %q) of a deleted worktree = %+v", path, st)
		}
	}
	if _, err := ReadState(t.Context(), repo, "fleet/s/nope", ""); err == nil {
		t.Error("ReadState of a missing branch succeeded")
	}
	// A worktree with another branch checked out is not the branch's.
	if _, err := ReadState(t.Context(), repo, wt.Branch, repo); err == nil || !strings.Contains(err.Error(), "branch main") {
		t.Errorf("ReadState with the main work tree as path: %v", err)
	}
}

func TestStateFiles(t *testing.T) {
	files := map[string]string{"gone.txt": "g\n", "bin.dat": "\x00\x01"}
	repo, _, wt := newWorker(t, files)
	for i := range 60 {
		writeFile(t, wt.Path, fmt.Sprintf("many/f%02d.txt", i), "x\n")
	}
	writeFile(t, wt.Path, "bin.dat", "\x00\x02\x03")
	if err := os.Remove(filepath.Join(wt.Path, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	st := readState(t, repo, wt)
	if st.FilesTotal != 62 || len(st.Files) != MaxStateFiles || st.Uncommitted != 62 || st.Added != 60 || st.Removed != 1 {
		t.Fatalf("62 changed files: total %d, listed %d, uncommitted %d, +%d -%d", st.FilesTotal, len(st.Files), st.Uncommitted, st.Added, st.Removed)
	}
	if !slices.IsSortedFunc(st.Files, func(a, b FileStat) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("files not sorted")
	}
	if f := st.Files[0]; f.Path != "bin.dat" || !f.Binary || f.Status != "modified" || f.Added != 0 {
		t.Errorf("binary file: %+v", f)
	}
	if f := st.Files[1]; f.Path != "gone.txt" || f.Status != "deleted" || f.Removed != 1 {
		t.Errorf("deleted file: %+v", f)
	}
}

func TestStateCleansUp(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	writeFile(t, wt.Path, "a.txt", "changed\n")
	writeFile(t, wt.Path, "u.txt", "untracked\n")
	index := git(t, wt.Path, "rev-parse", "--git-path", "index")
	info, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	st1 := readState(t, repo, wt)
	st2 := readState(t, repo, wt)
	if !reflect.DeepEqual(st1, st2) {
		t.Errorf("two reads differ: %+v and %+v", st1, st2)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if again, err := os.Stat(index); err != nil || !again.ModTime().Equal(info.ModTime()) || again.Size() != info.Size() {
		t.Errorf("the worktree's index was rewritten")
	}
	if got := git(t, wt.Path, "status", "--porcelain"); got != "M a.txt\n?? u.txt" && got != " M a.txt\n?? u.txt" {
		t.Errorf("status after ReadState: %q", got)
	}
}

// BenchmarkReadState is the fleet's git-state refresh of one worker in a
// 2,000-file repository, against TakeSnapshot (one git status, the anchor)
// in the same run: clean (committed work only) and with 20 uncommitted
// files (the dangling snapshot commit and the dry-run merge included).
func BenchmarkReadState(b *testing.B) {
	files := map[string]string{}
	for i := range 2000 {
		files[fmt.Sprintf("pkg%02d/file%04d.go", i/100, i)] = fmt.Sprintf("package pkg\n\n// file %d\nvar X%d = %d\n", i, i, i)
	}
	repo := newRepo(b, files)
	m, err := Open(b.Context(), repo, filepath.Join(fleetWorktrees(b), "s"), "s")
	if err != nil {
		b.Fatal(err)
	}
	wt, err := m.Create(b.Context(), "w1")
	if err != nil {
		b.Fatal(err)
	}
	writeFile(b, wt.Path, "pkg00/file0000.go", "package pkg\n// committed\n")
	git(b, wt.Path, "commit", "-q", "-am", "work")
	b.Run("anchor=TakeSnapshot", func(b *testing.B) {
		for b.Loop() {
			if _, err := TakeSnapshot(b.Context(), wt.Path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("clean", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadState(b.Context(), repo, wt.Branch, wt.Path); err != nil {
				b.Fatal(err)
			}
		}
	})
	for i := range 20 {
		writeFile(b, wt.Path, fmt.Sprintf("pkg%02d/file%04d.go", i, i*100+1), "package pkg\n// dirty\n")
	}
	b.Run("uncommitted=20", func(b *testing.B) {
		for b.Loop() {
			st, err := ReadState(b.Context(), repo, wt.Branch, wt.Path)
			if err != nil || st.Uncommitted != 20 {
				b.Fatal(st.Uncommitted, err)
			}
		}
	})
}
