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
	if _, _, err := Prune(t.Context(), dir, t.TempDir(), PruneOptions{}); !errors.Is(err, ErrNotRepo) {
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
		if err := m.Remove(t.Context(), name, RemoveOptions{Force: true}); err == nil {
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
	if err := m.Remove(t.Context(), "w2", RemoveOptions{Force: true}); !errors.Is(err, ErrExists) {
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
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
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
		if err := m.Remove(t.Context(), w.Worker, RemoveOptions{}); !errors.Is(err, ErrDirty) {
			t.Errorf("Remove(%s) of a dirty worktree: %v, want ErrDirty", w.Worker, err)
		}
		if !exists(w.Path) || git(t, repo, "branch", "--list", w.Branch) == "" {
			t.Errorf("refused Remove(%s) removed something", w.Worker)
		}
	}

	if err := m.Remove(t.Context(), "clean", RemoveOptions{}); err != nil {
		t.Fatalf("Remove of a clean worktree: %v", err)
	}
	if exists(clean.Path) || git(t, repo, "branch", "--list", clean.Branch) != "" {
		t.Error("clean worktree or its branch still there")
	}

	if err := m.Remove(t.Context(), "dirty", RemoveOptions{Force: true}); err != nil {
		t.Fatalf("forced Remove: %v", err)
	}
	if exists(dirty.Path) {
		t.Error("forced Remove left the worktree")
	}
	// The branch stays, and keeps the uncommitted work too.
	if git(t, repo, "branch", "--list", dirty.Branch) == "" || !strings.Contains(git(t, repo, "show", "--name-only", "--format=%s", dirty.Branch), "Uncommitted work saved") {
		t.Error("forced Remove did not keep the branch with the uncommitted work saved on it")
	}
	if err := m.Remove(t.Context(), "dirty", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Errorf("Remove of the kept branch: %v, want ErrUnmerged", err)
	}
	if err := m.Remove(t.Context(), "dirty", RemoveOptions{Force: true, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(t.Context(), "dirty", RemoveOptions{}); !errors.Is(err, fs.ErrNotExist) {
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

	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove with unmerged commits: %v, want ErrUnmerged", err)
	}
	if !exists(wt.Path) {
		t.Fatal("refused Remove removed the worktree")
	}
	git(t, repo, "merge", "-q", "--ff-only", wt.Branch)
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
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

	removed, skipped, err := Prune(t.Context(), filepath.Join(repo), fw, PruneOptions{})
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

	removed, skipped, err = Prune(t.Context(), repo, fw, PruneOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || !strings.HasPrefix(removed[0], created[1].Path+" (branch ") || len(skipped) != 0 {
		t.Errorf("forced Prune: removed %q, skipped %q", removed, skipped)
	}
	if out := git(t, repo, "worktree", "list", "--porcelain"); strings.Contains(out, fw) {
		t.Errorf("worktrees left after forced Prune:\n%s", out)
	}
}

// branchTip returns the commit branch points at, "" when it does not exist.
func branchTip(t *testing.T, repo, branch string) string {
	t.Helper()
	c, err := resolveCommit(t.Context(), repo, "refs/heads/"+branch)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRemoveUnpushedCommits(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "unpushed", map[string]string{"b.txt": "b\n"})

	err := m.Remove(t.Context(), "w1", RemoveOptions{})
	if !errors.Is(err, ErrUnmerged) || !strings.Contains(err.Error(), wt.Branch) {
		t.Fatalf("Remove with unpushed commits: %v, want ErrUnmerged naming the branch", err)
	}
	if !exists(wt.Path) || branchTip(t, repo, wt.Branch) != tip {
		t.Fatal("refused Remove removed something")
	}
	// DeleteBranch without Force deletes only a landed branch.
	if err := m.Remove(t.Context(), "w1", RemoveOptions{DeleteBranch: true}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove with DeleteBranch only: %v, want ErrUnmerged", err)
	}

	// Force removes the worktree, even dirty, and keeps the branch.
	writeFile(t, wt.Path, "scratch.txt", "goes with the worktree\n")
	if err := m.Remove(t.Context(), "w1", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if exists(wt.Path) || slices.Contains(worktreePaths(t, repo), wt.Path) {
		t.Error("forced Remove left the worktree")
	}
	// The uncommitted scratch file was saved on the branch, on top of the
	// unpushed commit.
	saved := branchTip(t, repo, wt.Branch)
	if git(t, repo, "rev-parse", saved+"^") != tip || git(t, repo, "show", saved+":scratch.txt") != "goes with the worktree" ||
		git(t, repo, "config", "branch.fleet/s/w1.fleetBase") != "main" {
		t.Fatal("forced Remove lost the branch, its metadata or the uncommitted work")
	}
	tip = saved
	st, err := ReadState(t.Context(), repo, wt.Branch, wt.Path)
	if err != nil || !st.Missing || st.Ahead != 2 {
		t.Errorf("state of the kept branch: %+v, %v", st, err)
	}
	// Still unlanded without a worktree; Force with DeleteBranch deletes it.
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Errorf("Remove of the kept branch: %v, want ErrUnmerged", err)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{Force: true, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	if branchTip(t, repo, wt.Branch) != "" {
		t.Error("Force with DeleteBranch kept the branch")
	}
}

func TestRemoveForceDeleteBranch(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "unpushed", map[string]string{"b.txt": "b\n"})
	if err := m.Remove(t.Context(), "w1", RemoveOptions{Force: true, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	if exists(wt.Path) || branchTip(t, repo, wt.Branch) != "" {
		t.Error("worktree or branch left")
	}
}

func TestRemoveRebasedByHand(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	commitFiles(t, repo, "main moves", map[string]string{"c.txt": "c\n"})
	git(t, wt.Path, "rebase", "-q", "main")

	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove of a rebased, unmerged branch: %v, want ErrUnmerged", err)
	}
	git(t, repo, "merge", "-q", "--ff-only", wt.Branch)
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove after main fast-forwarded to it: %v", err)
	}
	if exists(wt.Path) || branchTip(t, repo, wt.Branch) != "" {
		t.Error("worktree or branch left")
	}
}

func TestRemoveCherryPicked(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "one", map[string]string{"b.txt": "b\n"})
	tip := commitFiles(t, wt.Path, "two", map[string]string{"c.txt": "c\n"})
	commitFiles(t, repo, "main moves", map[string]string{"d.txt": "d\n"})
	git(t, repo, "cherry-pick", tip) // only the second: the first is still unlanded
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove with one commit not on main: %v, want ErrUnmerged", err)
	}
	git(t, repo, "cherry-pick", tip+"~1")
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove after every commit was cherry-picked: %v", err)
	}
	if branchTip(t, repo, wt.Branch) != "" {
		t.Error("branch left")
	}
}

func TestRemoveUntrackedOnly(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n", ".gitignore": "*.log\n"})
	writeFile(t, wt.Path, "build.log", "ignored: does not count\n")
	writeFile(t, wt.Path, "notes/todo.txt", "untracked\n")
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrDirty) {
		t.Fatalf("Remove with an untracked file: %v, want ErrDirty", err)
	}
	if readFile(t, wt.Path, "notes/todo.txt") != "untracked\n" || branchTip(t, repo, wt.Branch) == "" {
		t.Fatal("refused Remove removed something")
	}
	os.RemoveAll(filepath.Join(wt.Path, "notes"))
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove with only an ignored file: %v", err)
	}
}

func TestRemoveDeletedByHand(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove of a deleted worktree with unlanded commits: %v, want ErrUnmerged", err)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(worktreePaths(t, repo), wt.Path) {
		t.Error("registration not pruned")
	}
	if branchTip(t, repo, wt.Branch) != tip {
		t.Fatal("the unlanded branch was not kept")
	}
	// The work comes back with the worker.
	again, err := m.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, again.Path, "b.txt") != "b\n" || again.BaseBranch != "main" {
		t.Errorf("re-created worktree %+v lacks the work", again)
	}
}

func TestRemoveMovedByHand(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	writeFile(t, wt.Path, "wip.txt", "uncommitted\n")
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(wt.Path, moved); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); !errors.Is(err, ErrUnmerged) {
		t.Fatalf("Remove of a moved worktree with unlanded commits: %v, want ErrUnmerged", err)
	}
	removed, skipped, err := Prune(t.Context(), repo, filepath.Dir(m.Root()), PruneOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := wt.Path + " (branch fleet/s/w1 kept with its work: it is on no other branch)"; !slices.Equal(removed, []string{want}) || len(skipped) != 0 {
		t.Errorf("forced Prune of a moved worktree: removed %q, skipped %q", removed, skipped)
	}
	if slices.Contains(worktreePaths(t, repo), wt.Path) || branchTip(t, repo, wt.Branch) != tip {
		t.Error("registration left, or branch lost")
	}
	for _, f := range []string{"a.txt", "b.txt", "wip.txt", ".git"} {
		if !exists(filepath.Join(moved, f)) {
			t.Errorf("moved worktree lost %s", f)
		}
	}
	if readFile(t, moved, "wip.txt") != "uncommitted\n" {
		t.Error("moved worktree's uncommitted file changed")
	}
}

func TestPruneReasonsAndSession(t *testing.T) {
	repo := newRepo(t, map[string]string{"a.txt": "a\n"})
	fw := fleetWorktrees(t)
	s1, err := Open(t.Context(), repo, filepath.Join(fw, "s1"), "s1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), repo, filepath.Join(fw, "s2"), "s2")
	if err != nil {
		t.Fatal(err)
	}
	unlanded, err := s1.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	dirty, err := s1.Create(t.Context(), "w2")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s2.Create(t.Context(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	commitFiles(t, unlanded.Path, "work", map[string]string{"b.txt": "b\n"})
	writeFile(t, dirty.Path, "scratch.txt", "s\n")

	removed, skipped, err := Prune(t.Context(), repo, fw, PruneOptions{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(skipped)
	want := []string{
		unlanded.Path + ": branch fleet/s1/w1 has commits on no other branch (merge them, or --force keeps the branch and removes only the worktree)",
		dirty.Path + ": uncommitted changes (--force saves them on branch fleet/s1/w2 and removes the worktree)",
	}
	slices.Sort(want)
	if len(removed) != 0 || !slices.Equal(skipped, want) {
		t.Errorf("Prune s1: removed %q, skipped %q, want skipped %q", removed, skipped, want)
	}

	removed, skipped, err = Prune(t.Context(), repo, fw, PruneOptions{Session: "s1", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want = []string{unlanded.Path + " (branch fleet/s1/w1 kept with its work: it is on no other branch)",
		dirty.Path + " (branch fleet/s1/w2 kept with its work: it is on no other branch)"}
	slices.Sort(want)
	if !slices.Equal(removed, want) || len(skipped) != 0 {
		t.Errorf("forced Prune s1: removed %q, skipped %q, want removed %q", removed, skipped, want)
	}
	if branchTip(t, repo, "fleet/s1/w1") == "" || git(t, repo, "show", "fleet/s1/w2:scratch.txt") != "s" {
		t.Error("forced Prune: a branch was not kept with its work")
	}
	if !exists(other.Path) {
		t.Fatal("Prune of s1 removed s2's worktree")
	}
	if _, _, err := Prune(t.Context(), repo, fw, PruneOptions{Session: "../x"}); err == nil {
		t.Error("invalid session accepted")
	}
	if removed, _, err = Prune(t.Context(), repo, fw, PruneOptions{}); err != nil || !slices.Equal(removed, []string{other.Path}) {
		t.Errorf("Prune of the rest: %q, %v", removed, err)
	}
}
