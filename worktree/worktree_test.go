package worktree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestOpenOutsideRepo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir)) // even if /tmp sits in a repository
	_, err := Open(t.Context(), dir, filepath.Join(t.TempDir(), "wt", "s"), "s")
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Open outside a repository: got %v, want ErrNotRepo", err)
	}
	if _, _, err := Prune(t.Context(), dir, t.TempDir(), false); !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Prune outside a repository: got %v, want ErrNotRepo", err)
	}
}

func TestOpenWithoutGit(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	t.Setenv("PATH", t.TempDir())
	_, err := Open(t.Context(), repo, filepath.Join(t.TempDir(), "s"), "s")
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Open without git: got %v, want ErrNotRepo", err)
	}
	if !strings.Contains(err.Error(), "cannot run git") || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("error should say git could not run: %v", err)
	}
}

func TestOpenFindsRootHeadDirty(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n", "sub/dir/b.txt": "b\n"})
	root := filepath.Join(fleetWorktrees(t), "s1")
	m, err := Open(t.Context(), filepath.Join(repo, "sub", "dir"), root, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if m.RepoRoot() != repo {
		t.Errorf("RepoRoot = %q, want %q", m.RepoRoot(), repo)
	}
	if want := git(t, repo, "rev-parse", "HEAD"); m.Head() != want {
		t.Errorf("Head = %q, want %q", m.Head(), want)
	}
	if m.Dirty() {
		t.Error("Dirty on a clean tree")
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("root mode %v, want 0700", fi.Mode().Perm())
	}

	writeFile(t, repo, "untracked.txt", "u\n")
	if m, err = Open(t.Context(), repo, root, "s1"); err != nil {
		t.Fatal(err)
	}
	if !m.Dirty() {
		t.Error("Dirty false with an untracked file")
	}
	os.Remove(filepath.Join(repo, "untracked.txt"))
	writeFile(t, repo, "a.txt", "changed\n")
	if m, err = Open(t.Context(), repo, root, "s1"); err != nil {
		t.Fatal(err)
	}
	if !m.Dirty() {
		t.Error("Dirty false with a modified file")
	}

	if _, err := Open(t.Context(), repo, root, "../evil"); err == nil {
		t.Error("Open accepted session name ../evil")
	}
}

func TestCreateWithoutCommits(t *testing.T) {
	repo := newRepo(t, nil)
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	if m.Head() != "" {
		t.Errorf("Head = %q in a repository without commits", m.Head())
	}
	_, err = m.Create(t.Context(), "w1")
	if err == nil || !strings.Contains(err.Error(), "no commits") {
		t.Fatalf("Create without commits: %v, want an error saying there are no commits", err)
	}
}

func TestCreate(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "committed\n"})
	writeFile(t, repo, "a.txt", "uncommitted\n")
	writeFile(t, repo, "untracked.txt", "u\n")
	root := filepath.Join(fleetWorktrees(t), "s1")
	m, err := Open(t.Context(), repo, root, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Dirty() {
		t.Error("Dirty false")
	}
	wt, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	want := Worktree{Worker: "w1", Path: filepath.Join(root, "w1"), Branch: "fleet/s1/w1", BaseCommit: m.Head()}
	if wt.Worker != want.Worker || wt.Path != want.Path || wt.Branch != want.Branch || wt.BaseCommit != want.BaseCommit || wt.Resumed || len(wt.Warnings) > 0 {
		t.Fatalf("Create = %+v, want %+v", wt, want)
	}
	if got := git(t, wt.Path, "branch", "--show-current"); got != "fleet/s1/w1" {
		t.Errorf("branch %q", got)
	}
	if got := git(t, wt.Path, "rev-parse", "HEAD"); got != m.Head() {
		t.Errorf("worktree HEAD %s, want %s", got, m.Head())
	}
	if got := readFile(t, wt.Path, "a.txt"); got != "committed\n" {
		t.Errorf("a.txt in the worktree = %q: uncommitted changes leaked in", got)
	}
	if exists(filepath.Join(wt.Path, "untracked.txt")) {
		t.Error("untracked file copied into the worktree")
	}

	// A second Create (a resumed session) returns the same worktree, work included.
	writeFile(t, wt.Path, "work.txt", "in progress\n")
	again, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if again.Path != wt.Path || again.Branch != wt.Branch || again.BaseCommit != wt.BaseCommit || !again.Resumed {
		t.Errorf("second Create = %+v, want the same worktree, resumed", again)
	}
	if readFile(t, wt.Path, "work.txt") != "in progress\n" {
		t.Error("second Create lost the worktree's files")
	}
}

func TestCreateRejectsBadWorker(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "..", "../x", "a/b", "W1", "w 1", strings.Repeat("a", 65)} {
		if _, err := m.Create(t.Context(), name); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
		if err := m.Remove(t.Context(), name, true); err == nil {
			t.Errorf("Remove(%q) succeeded", name)
		}
	}
}

func TestCreateExists(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	root := filepath.Join(fleetWorktrees(t), "s")
	m, err := Open(t.Context(), repo, root, "s")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "w2")
	writeFile(t, path, "keep.txt", "mine\n")
	_, err = m.Create(t.Context(), "w2")
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Create over a plain directory: %v, want ErrExists naming %s", err, path)
	}
	if readFile(t, path, "keep.txt") != "mine\n" {
		t.Error("Create touched the existing directory")
	}
	if err := m.Remove(t.Context(), "w2", true); !errors.Is(err, ErrExists) {
		t.Errorf("Remove of a plain directory: %v, want ErrExists", err)
	}
	if !exists(filepath.Join(path, "keep.txt")) {
		t.Error("Remove deleted a directory that is not a worktree")
	}

	// A worktree on another branch at the path is not this worker's either.
	other := filepath.Join(root, "w3")
	git(t, repo, "worktree", "add", "-q", "-b", "someone-else", other)
	if _, err := m.Create(t.Context(), "w3"); !errors.Is(err, ErrExists) {
		t.Errorf("Create over another branch's worktree: %v, want ErrExists", err)
	}
}

func TestCreateReattachesDeletedWorktree(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, wt.Path, "done.txt", "work\n")
	git(t, wt.Path, "add", "done.txt")
	git(t, wt.Path, "commit", "-q", "-m", "work")
	tip := git(t, wt.Path, "rev-parse", "HEAD")
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}

	infos, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].Missing {
		t.Errorf("List after deleting the directory = %+v, want one Missing", infos)
	}

	again, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if again.Resumed || again.Path != wt.Path || again.BaseCommit != m.Head() {
		t.Errorf("re-attach = %+v, want path %s, base %s", again, wt.Path, m.Head())
	}
	if got := git(t, again.Path, "rev-parse", "HEAD"); got != tip {
		t.Errorf("re-attached HEAD %s, want the branch tip %s", got, tip)
	}
	if readFile(t, again.Path, "done.txt") != "work\n" {
		t.Error("committed work missing after re-attach")
	}
}

func TestCreateConcurrent(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n", "b/c.txt": "c\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Create(t.Context(), fmt.Sprintf("w%d", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create w%d: %v", i, err)
		}
	}
	infos, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != n {
		t.Fatalf("List = %d worktrees, want %d", len(infos), n)
	}
	for i, in := range infos {
		if in.Worker != fmt.Sprintf("w%d", i) || in.Branch != fmt.Sprintf("fleet/s/w%d", i) || in.Head != m.Head() || in.Dirty || in.Missing {
			t.Errorf("List[%d] = %+v", i, in)
		}
	}
}

func TestCreateWithSubmodule(t *testing.T) {
	sub := newRepo(t, map[string]string{"s.txt": "from the submodule\n"})
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	git(t, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "lib")
	git(t, repo, "commit", "-q", "-m", "add submodule")

	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if len(wt.Warnings) > 0 {
		t.Errorf("warnings: %q", wt.Warnings)
	}
	if got := readFile(t, wt.Path, "lib/s.txt"); got != "from the submodule\n" {
		t.Errorf("lib/s.txt = %q, want the submodule checked out", got)
	}

	// git itself refuses to remove a worktree with submodules without
	// --force; a clean one must still go without the caller's force.
	if err := m.Remove(t.Context(), "w1", false); err != nil {
		t.Fatalf("Remove of a clean worktree with a submodule: %v", err)
	}
	if exists(wt.Path) {
		t.Error("worktree still there")
	}

	// A submodule that cannot be fetched is a warning, not an error.
	if err := os.Rename(sub, sub+"-moved"); err != nil {
		t.Fatal(err)
	}
	wt2, err := m.Create(t.Context(), "w2")
	if err != nil {
		t.Fatalf("Create with an unreachable submodule: %v", err)
	}
	if len(wt2.Warnings) == 0 {
		t.Error("no warning for an unreachable submodule")
	}
	if !exists(filepath.Join(wt2.Path, "a.txt")) {
		t.Error("worktree not checked out")
	}
}

func TestListAndRemove(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	dirty, err := m.Create(t.Context(), "dirty")
	if err != nil {
		t.Fatal(err)
	}
	clean, err := m.Create(t.Context(), "clean")
	if err != nil {
		t.Fatal(err)
	}
	modified, err := m.Create(t.Context(), "modified")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dirty.Path, "new.txt", "untracked\n")
	writeFile(t, modified.Path, "a.txt", "changed\n")
	writeFile(t, repo, ".gitignore", "*.log\n")
	git(t, repo, "add", ".gitignore")
	git(t, repo, "commit", "-q", "-m", "ignore logs")

	infos, err := m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, in := range infos {
		got[in.Worker] = in.Dirty
	}
	if want := map[string]bool{"clean": false, "dirty": true, "modified": true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List dirty states = %v, want %v", got, want)
	}

	for _, w := range []Worktree{dirty, modified} {
		if err := m.Remove(t.Context(), w.Worker, false); !errors.Is(err, ErrDirty) {
			t.Errorf("Remove(%s) of a dirty worktree: %v, want ErrDirty", w.Worker, err)
		}
		if !exists(w.Path) || git(t, repo, "branch", "--list", w.Branch) == "" {
			t.Errorf("refused Remove(%s) removed something", w.Worker)
		}
	}

	if err := m.Remove(t.Context(), "clean", false); err != nil {
		t.Fatalf("Remove of a clean worktree: %v", err)
	}
	if exists(clean.Path) || git(t, repo, "branch", "--list", clean.Branch) != "" {
		t.Error("clean worktree or its branch still there")
	}

	if err := m.Remove(t.Context(), "dirty", true); err != nil {
		t.Fatalf("forced Remove: %v", err)
	}
	if exists(dirty.Path) || git(t, repo, "branch", "--list", dirty.Branch) != "" {
		t.Error("forced Remove left the worktree or its branch")
	}
	if err := m.Remove(t.Context(), "dirty", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of a removed worker: %v, want fs.ErrNotExist", err)
	}
	infos, err = m.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Worker != "modified" {
		t.Errorf("List after removals = %+v", infos)
	}
}

func TestRemoveKeepsUnmergedCommits(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	m, err := Open(t.Context(), repo, filepath.Join(fleetWorktrees(t), "s"), "s")
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, wt.Path, "feature.txt", "f\n")
	git(t, wt.Path, "add", "feature.txt")
	git(t, wt.Path, "commit", "-q", "-m", "feature")

	if err := m.Remove(t.Context(), "w1", false); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove with unmerged commits: %v, want ErrUnmerged", err)
	}
	if !exists(wt.Path) {
		t.Fatal("refused Remove removed the worktree")
	}
	git(t, repo, "merge", "-q", "--ff-only", wt.Branch)
	if err := m.Remove(t.Context(), "w1", false); err != nil {
		t.Fatalf("Remove after merging: %v", err)
	}
}

func TestPrune(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	other := newRepo(t, map[string]string{"b.txt": "b\n"})
	fw := fleetWorktrees(t)

	s1, err := Open(t.Context(), repo, filepath.Join(fw, "s1"), "s1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), repo, filepath.Join(fw, "s2"), "s2")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := Open(t.Context(), other, filepath.Join(fw, "s3"), "s3")
	if err != nil {
		t.Fatal(err)
	}
	var created []Worktree
	for _, c := range []struct {
		m      *Manager
		worker string
	}{{s1, "w1"}, {s1, "w2"}, {s2, "w1"}, {s2, "gone"}, {s3, "w1"}} {
		wt, err := c.m.Create(t.Context(), c.worker)
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, wt)
	}
	writeFile(t, created[1].Path, "scratch.txt", "dirty\n") // s1/w2
	os.RemoveAll(created[3].Path)                           // s2/gone: deleted by hand

	removed, skipped, err := Prune(t.Context(), filepath.Join(repo), fw, false)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	wantRemoved := []string{created[0].Path, created[3].Path, created[2].Path}
	slices.Sort(wantRemoved)
	if !slices.Equal(removed, wantRemoved) {
		t.Errorf("removed = %q, want %q", removed, wantRemoved)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], created[1].Path+": ") || !strings.Contains(skipped[0], "uncommitted") {
		t.Errorf("skipped = %q, want s1/w2 with its reason", skipped)
	}
	for _, b := range []string{"fleet/s1/w1", "fleet/s2/w1", "fleet/s2/gone"} {
		if git(t, repo, "branch", "--list", b) != "" {
			t.Errorf("branch %s survived Prune", b)
		}
	}
	if exists(filepath.Join(fw, "s2")) {
		t.Error("empty session directory s2 left behind")
	}
	if !exists(created[4].Path) {
		t.Error("Prune removed another repository's worktree")
	}

	removed, skipped, err = Prune(t.Context(), repo, fw, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{created[1].Path}) || len(skipped) != 0 {
		t.Errorf("forced Prune: removed %q, skipped %q", removed, skipped)
	}
	if out := git(t, repo, "worktree", "list", "--porcelain"); strings.Contains(out, fw) {
		t.Errorf("worktrees left after forced Prune:\n%s", out)
	}
}
