package worktree

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// parents returns the parents of commit rev.
func parents(t *testing.T, dir, rev string) []string {
	t.Helper()
	return strings.Fields(git(t, dir, "rev-list", "--no-walk", "--parents", rev))[1:]
}

// worktreePaths lists the work trees git has registered.
func worktreePaths(t *testing.T, repo string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(git(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	return paths
}

func TestMergeCommit(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "add b", map[string]string{"b.txt": "b\n"})
	writeFile(t, repo, "notes.txt", "the user's untracked file\n") // does not block

	res, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mainTip := git(t, repo, "rev-parse", "main")
	if res.Into != "main" || res.Mode != MergeCommit || res.Commit != mainTip || !slices.Equal(res.Files, []string{"b.txt"}) || res.FilesTotal != 1 {
		t.Errorf("Merge = %+v, main at %s", res, mainTip)
	}
	// --no-ff even though a fast-forward was possible.
	if got := parents(t, repo, "main"); !slices.Equal(got, []string{m.Head(), tip}) {
		t.Errorf("merge parents %q, want main's old tip and the branch tip", got)
	}
	if got := git(t, repo, "log", "-1", "--format=%s", "main"); got != "Merge branch 'fleet/s/w1' into main" {
		t.Errorf("default message %q", got)
	}
	// The user's checked-out tree is updated, their untracked file kept.
	if readFile(t, repo, "b.txt") != "b\n" || readFile(t, repo, "notes.txt") != "the user's untracked file\n" {
		t.Error("main work tree not updated, or the untracked file touched")
	}
	if got := git(t, repo, "status", "--porcelain"); got != "?? notes.txt" {
		t.Errorf("main status after merge: %q", got)
	}
	st := readState(t, repo, wt)
	if !st.Merged || st.MergedInto != "main" {
		t.Errorf("state after merge: %+v", st)
	}
	if got := git(t, repo, "config", "branch.fleet/s/w1.fleetMerged"); got != tip {
		t.Errorf("fleetMerged = %q, want %s", got, tip)
	}
	// Nothing is left to land.
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); !errors.Is(err, ErrNothingToLand) {
		t.Errorf("second Merge: %v, want ErrNothingToLand", err)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Errorf("Remove of a merged worker: %v", err)
	}
}

func TestMergeConflictRefused(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	tip := commitFiles(t, wt.Path, "worker edits", map[string]string{"a.txt": "worker\n", "b.txt": "worker\n", "c.txt": "c\n"})
	mainTip := commitFiles(t, repo, "main edits", map[string]string{"a.txt": "main\n", "b.txt": "main\n"})
	writeFile(t, repo, "scratch.txt", "untracked\n")
	before := imageOf(t, repo)
	wtBefore := imageOf(t, wt.Path)
	worktreesBefore := worktreePaths(t, repo)

	for _, mode := range []MergeMode{MergeCommit, Squash, Rebase} {
		_, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Mode: mode})
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Target != "main" || ce.Branch != wt.Branch || !slices.Equal(ce.Files, []string{"a.txt", "b.txt"}) {
			t.Fatalf("%s with a conflict: %v, want a ConflictError for a.txt, b.txt", mode, err)
		}
		if want := "merging fleet/s/w1 into main would conflict in a.txt, b.txt; nothing was changed"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	}
	if after := imageOf(t, repo); !after.equal(before) {
		t.Errorf("the user's tree changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if after := imageOf(t, wt.Path); !after.equal(wtBefore) {
		t.Error("the worker's tree changed")
	}
	if git(t, repo, "rev-parse", "main") != mainTip || git(t, repo, "rev-parse", wt.Branch) != tip {
		t.Error("a ref moved")
	}
	if got := worktreePaths(t, repo); !slices.Equal(got, worktreesBefore) {
		t.Errorf("worktrees %q, want %q", got, worktreesBefore)
	}
	if _, err := runGit(t.Context(), repo, "config", "branch.fleet/s/w1.fleetMerged"); err == nil {
		t.Error("a refused merge was recorded")
	}
}

func TestMergeSquash(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "first step", map[string]string{"b.txt": "b\n"})
	tip := commitFiles(t, wt.Path, "second step", map[string]string{"a.txt": "a2\n"})

	res, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Mode: Squash})
	if err != nil {
		t.Fatal(err)
	}
	if got := parents(t, repo, "main"); !slices.Equal(got, []string{m.Head()}) || res.Commit != git(t, repo, "rev-parse", "main") {
		t.Errorf("squash parents %q, result %+v", got, res)
	}
	if git(t, repo, "rev-parse", "main^{tree}") != git(t, repo, "rev-parse", tip+"^{tree}") {
		t.Error("squashed content differs from the branch's")
	}
	msg := git(t, repo, "log", "-1", "--format=%B", "main")
	if !strings.HasPrefix(msg, "Squash branch 'fleet/s/w1' into main") || !strings.Contains(msg, "* first step\n* second step") {
		t.Errorf("squash message %q", msg)
	}
	if readFile(t, repo, "a.txt") != "a2\n" || git(t, repo, "status", "--porcelain") != "" {
		t.Error("main work tree not updated cleanly")
	}
	if st := readState(t, repo, wt); !st.Merged || st.MergedInto != "main" {
		t.Errorf("state after squash: %+v", st)
	}
	// The branch's commits are on no other branch, but landed.
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove after a squash merge: %v", err)
	}
	if exists(wt.Path) || git(t, repo, "branch", "--list", wt.Branch) != "" {
		t.Error("worktree or branch left after Remove")
	}
}

func TestMergeRebase(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "w one", map[string]string{"b.txt": "b\n"})
	tip := commitFiles(t, wt.Path, "w two", map[string]string{"c.txt": "c\n"})
	commitFiles(t, repo, "main moves", map[string]string{"d.txt": "d\n"})
	worktreesBefore := worktreePaths(t, repo)

	res, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Mode: Rebase})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, repo, "log", "--format=%s", "main"); got != "w two\nw one\nmain moves\ninitial" {
		t.Errorf("main history:\n%s", got)
	}
	if git(t, repo, "rev-list", "--merges", "main") != "" || res.Commit != git(t, repo, "rev-parse", "main") {
		t.Error("history not linear, or result not main's tip")
	}
	if !slices.Equal(res.Files, []string{"b.txt", "c.txt"}) {
		t.Errorf("files %q", res.Files)
	}
	if readFile(t, repo, "c.txt") != "c\n" || git(t, repo, "status", "--porcelain") != "" {
		t.Error("main work tree not updated cleanly")
	}
	if git(t, repo, "rev-parse", wt.Branch) != tip {
		t.Error("the worker branch itself was rebased")
	}
	if got := worktreePaths(t, repo); !slices.Equal(got, worktreesBefore) {
		t.Errorf("worktrees %q after the rebase, want %q", got, worktreesBefore)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if st := readState(t, repo, wt); !st.Merged {
		t.Errorf("state after rebase: %+v", st)
	}
}

func TestMergeRebaseConflict(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	// The worker's net change equals main's, so the merge is clean, but its
	// first commit conflicts when replayed.
	commitFiles(t, wt.Path, "w detour", map[string]string{"a.txt": "detour\n"})
	commitFiles(t, wt.Path, "w back", map[string]string{"a.txt": "m\n", "b.txt": "b\n"})
	mainTip := commitFiles(t, repo, "main", map[string]string{"a.txt": "m\n"})
	before := imageOf(t, repo)
	worktreesBefore := worktreePaths(t, repo)

	_, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Mode: Rebase})
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"a.txt"}) || !strings.HasPrefix(err.Error(), "rebasing fleet/s/w1 onto main would conflict in a.txt") {
		t.Fatalf("rebase with a conflicting step: %v", err)
	}
	if git(t, repo, "rev-parse", "main") != mainTip || !imageOf(t, repo).equal(before) {
		t.Error("main or its work tree changed")
	}
	if got := worktreePaths(t, repo); !slices.Equal(got, worktreesBefore) {
		t.Errorf("worktrees %q after the failed rebase, want %q", got, worktreesBefore)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A merge of the same branch is clean.
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); err != nil {
		t.Errorf("merge after the refused rebase: %v", err)
	}
}

func TestMergeIntoBranchNotCheckedOut(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	git(t, repo, "branch", "release")
	tip := commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	writeFile(t, repo, "a.txt", "the user's uncommitted edit\n") // main's tree is not the target's
	before := imageOf(t, repo)

	res, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Into: "release", Message: "land it"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Into != "release" || res.Commit != git(t, repo, "rev-parse", "release") {
		t.Errorf("Merge = %+v", res)
	}
	if got := parents(t, repo, "release"); !slices.Equal(got, []string{m.Head(), tip}) {
		t.Errorf("parents %q", got)
	}
	if got := git(t, repo, "log", "-1", "--format=%s", "release"); got != "land it" {
		t.Errorf("message %q", got)
	}
	if git(t, repo, "rev-parse", "main") != m.Head() || !imageOf(t, repo).equal(before) {
		t.Error("main or the user's work tree changed")
	}
	if got := git(t, repo, "config", "branch.fleet/s/w1.fleetMergedInto"); got != "release" {
		t.Errorf("fleetMergedInto = %q", got)
	}
}

func TestMergeDirtyTarget(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	writeFile(t, repo, "a.txt", "the user's edit\n")
	before := imageOf(t, repo)

	_, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{})
	var de *DirtyError
	if !errors.As(err, &de) || de.Path != repo || !slices.Equal(de.Files, []string{"a.txt"}) || de.Untracked {
		t.Fatalf("merge into a dirty tree: %v, want a DirtyError for %s a.txt", err, repo)
	}
	if !strings.Contains(err.Error(), "uncommitted changes in a.txt") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("message %q", err)
	}
	if git(t, repo, "rev-parse", "main") != m.Head() || !imageOf(t, repo).equal(before) {
		t.Error("refused merge changed main or its tree")
	}

	// Untracked files alone do not refuse, unless the merge would
	// overwrite one.
	git(t, repo, "checkout", "a.txt")
	writeFile(t, repo, "b.txt", "the user's own b\n")
	before = imageOf(t, repo)
	_, err = Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{})
	if !errors.As(err, &de) || !de.Untracked || !slices.Equal(de.Files, []string{"b.txt"}) ||
		!strings.HasPrefix(err.Error(), "untracked files in "+repo+" would be overwritten: b.txt") {
		t.Fatalf("merge over an untracked file: %v", err)
	}
	if git(t, repo, "rev-parse", "main") != m.Head() || !imageOf(t, repo).equal(before) {
		t.Error("refused merge changed main or its tree")
	}
	os.Remove(filepath.Join(repo, "b.txt"))
	writeFile(t, repo, "other.txt", "untracked\n")
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); err != nil {
		t.Fatalf("merge with an untracked file in the way of nothing: %v", err)
	}
	if readFile(t, repo, "b.txt") != "b\n" || readFile(t, repo, "other.txt") != "untracked\n" {
		t.Error("merge result wrong")
	}
}

func TestMergeRefusals(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); !errors.Is(err, ErrNothingToLand) {
		t.Errorf("merge of a fresh branch: %v, want ErrNothingToLand", err)
	}
	writeFile(t, wt.Path, "wip.txt", "uncommitted\n")
	_, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{})
	var de *DirtyError
	if !errors.As(err, &de) || de.Path != wt.Path || !slices.Equal(de.Files, []string{"wip.txt"}) {
		t.Errorf("merge of a dirty worktree: %v, want a DirtyError for it", err)
	}
	if _, err := CommitAll(t.Context(), wt.Path, "wip"); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Into: "nope"}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("merge into a missing branch: %v", err)
	}
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Mode: "octopus"}); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{Into: wt.Branch}); err == nil {
		t.Error("merge into itself accepted")
	}
	// Changes main already has are nothing to land either.
	commitFiles(t, repo, "same", map[string]string{"wip.txt": "uncommitted\n"})
	if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); !errors.Is(err, ErrNothingToLand) {
		t.Errorf("merge of changes main has: %v, want ErrNothingToLand", err)
	}
	if git(t, repo, "rev-list", "--count", m.Head()+"..main") != "1" {
		t.Error("main moved")
	}
}

func TestMergeConcurrent(t *testing.T) {
	repo, m, w1 := newWorker(t, map[string]string{"a.txt": "a\n"})
	w2, err := m.Create(t.Context(), "w2")
	if err != nil {
		t.Fatal(err)
	}
	commitFiles(t, w1.Path, "one", map[string]string{"one.txt": "1\n"})
	commitFiles(t, w2.Path, "two", map[string]string{"two.txt": "2\n"})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, wt := range []Worktree{w1, w2} {
		wg.Go(func() {
			_, errs[i] = Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{})
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent merges: %v", errs)
	}
	if readFile(t, repo, "one.txt") != "1\n" || readFile(t, repo, "two.txt") != "2\n" || git(t, repo, "status", "--porcelain") != "" {
		t.Error("main lacks a worker's work")
	}
}

func TestApply(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n", "keep.txt": "k\n"})
	commitFiles(t, wt.Path, "work", map[string]string{"a.txt": "a2\n", "b.txt": "b\n", "bin.dat": "\x00\x01\x02"})
	writeFile(t, wt.Path, "c.txt", "uncommitted\n")
	indexBefore := imageOf(t, repo).index

	files, err := Apply(t.Context(), repo, repo, wt.Branch, wt.Path, []string{"b.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, []string{"b.txt"}) {
		t.Errorf("Apply(b.txt) = %q", files)
	}
	img := imageOf(t, repo)
	if img.status != "?? b.txt" || img.files["a.txt"] != "a\n" || img.files["b.txt"] != "b\n" || img.index != indexBefore || img.head != m.Head() {
		t.Errorf("after applying b.txt: %+v", img)
	}

	// Uncommitted work applies too, and so does a binary file, from a
	// subdirectory of the user's tree.
	writeFile(t, repo, "sub/x.txt", "x\n")
	files, err = Apply(t.Context(), filepath.Join(repo, "sub"), repo, wt.Branch, wt.Path, []string{"c.txt", "bin.dat", "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, []string{"a.txt", "bin.dat", "c.txt"}) {
		t.Errorf("Apply = %q", files)
	}
	img = imageOf(t, repo)
	if img.files["a.txt"] != "a2\n" || img.files["c.txt"] != "uncommitted\n" || img.files["bin.dat"] != "\x00\x01\x02" || img.index != indexBefore || img.head != m.Head() {
		t.Errorf("after applying the rest: %+v", img)
	}
	if git(t, repo, "rev-list", "--count", "--all") != "2" {
		t.Error("Apply committed something")
	}

	if _, err := Apply(t.Context(), repo, repo, wt.Branch, wt.Path, []string{"keep.txt"}); !errors.Is(err, ErrNothingToLand) {
		t.Errorf("Apply of an unchanged path: %v, want ErrNothingToLand", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestApplyConflict(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	commitFiles(t, wt.Path, "work", map[string]string{"a.txt": "worker\n", "b.txt": "worker b\n", "new.txt": "n\n"})
	writeFile(t, repo, "a.txt", "the user's\n")
	writeFile(t, repo, "new.txt", "the user's new\n")
	before := imageOf(t, repo)

	_, err := Apply(t.Context(), repo, repo, wt.Branch, wt.Path, nil)
	var ce *ConflictError
	if !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"a.txt", "new.txt"}) || ce.Target != repo {
		t.Fatalf("Apply over conflicting changes: %v, want a ConflictError for a.txt, new.txt", err)
	}
	if !strings.HasPrefix(err.Error(), "applying fleet/s/w1 to "+repo+" would conflict in a.txt, new.txt") {
		t.Errorf("message %q", err)
	}
	if after := imageOf(t, repo); !after.equal(before) {
		t.Errorf("refused Apply changed the tree:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestCommitAll(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	// --no-verify: a failing pre-commit hook does not stop it.
	writeFile(t, repo, ".git/hooks/pre-commit", "#!/bin/sh\nexit 1\n")
	if err := os.Chmod(filepath.Join(repo, ".git/hooks/pre-commit"), 0o755); err != nil {
		t.Fatal(err)
	}

	if c, err := CommitAll(t.Context(), wt.Path, "nothing"); err != nil || c != "" {
		t.Errorf("CommitAll of a clean tree = %q, %v", c, err)
	}
	writeFile(t, wt.Path, "a.txt", "changed\n")
	writeFile(t, wt.Path, "new.txt", "new\n")
	c, err := CommitAll(t.Context(), wt.Path, "the work\n\nin detail")
	if err != nil {
		t.Fatal(err)
	}
	if c != git(t, wt.Path, "rev-parse", "HEAD") || git(t, wt.Path, "status", "--porcelain") != "" {
		t.Errorf("commit %s, HEAD %s, status %q", c, git(t, wt.Path, "rev-parse", "HEAD"), git(t, wt.Path, "status", "--porcelain"))
	}
	if got := git(t, wt.Path, "log", "-1", "--format=%an <%ae>|%cn|%B"); got != "Fleet Test <fleet@example.com>|Fleet Test|the work\n\nin detail" {
		t.Errorf("commit %q", got)
	}

	t.Run("without identity", func(t *testing.T) {
		t.Setenv("HOME", t.TempDir())
		for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		// Never guess one from the host name, as git otherwise may.
		git(t, repo, "config", "user.useConfigOnly", "true")
		if _, err := runGit(t.Context(), wt.Path, "var", "GIT_COMMITTER_IDENT"); err == nil {
			t.Fatal("git still has an identity")
		}
		writeFile(t, wt.Path, "more.txt", "more\n")
		if _, err := CommitAll(t.Context(), wt.Path, ""); err != nil {
			t.Fatal(err)
		}
		if got := git(t, wt.Path, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"); got != "agents-fleet <agents-fleet@localhost>|agents-fleet <agents-fleet@localhost>|agents-fleet: commit the work" {
			t.Errorf("commit without identity %q", got)
		}
		// Merge commits need the identity too.
		if _, err := Merge(t.Context(), repo, wt.Branch, wt.Path, MergeOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := git(t, repo, "log", "-1", "--format=%cn", "main"); got != "agents-fleet" {
			t.Errorf("merge committer %q", got)
		}
	})
}

func TestDiffAndLog(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	var buf bytes.Buffer
	if err := Diff(t.Context(), &buf, repo, wt.Branch, wt.Path, DiffOptions{}); err != nil || buf.Len() != 0 {
		t.Errorf("Diff of a fresh branch wrote %q, %v", buf.String(), err)
	}
	if err := Log(t.Context(), &buf, repo, wt.Branch, false); err != nil || buf.Len() != 0 {
		t.Errorf("Log of a fresh branch wrote %q, %v", buf.String(), err)
	}

	commitFiles(t, wt.Path, "edit a", map[string]string{"a.txt": "a2\n"})
	writeFile(t, wt.Path, "b.txt", "b2\n")
	writeFile(t, wt.Path, "odd name.txt", "untracked\n")
	if err := Diff(t.Context(), &buf, repo, wt.Branch, wt.Path, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"+a2", "+b2", "+untracked", "diff --git a/odd name.txt b/odd name.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("Diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("Diff colored without Color")
	}

	buf.Reset()
	if err := Diff(t.Context(), &buf, repo, wt.Branch, wt.Path, DiffOptions{Stat: true, Color: true, Paths: []string{"odd name.txt"}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "odd name.txt") || strings.Contains(out, "a.txt") || !strings.Contains(out, "1 file changed") || !strings.Contains(out, "\x1b[") {
		t.Errorf("Diff --stat of one path:\n%s", out)
	}

	buf.Reset()
	if err := Log(t.Context(), &buf, repo, wt.Branch, false); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "    edit a") || !strings.Contains(out, "a.txt | 2") || strings.Contains(out, "initial") {
		t.Errorf("Log:\n%s", out)
	}
}

func TestPush(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	tip := commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	remote := t.TempDir()
	git(t, remote, "init", "-q", "--bare")
	git(t, repo, "remote", "add", "origin", remote)

	if err := Push(t.Context(), repo, "origin", wt.Branch); err != nil {
		t.Fatal(err)
	}
	if got := git(t, remote, "rev-parse", "refs/heads/"+wt.Branch); got != tip {
		t.Errorf("remote has %s, want %s", got, tip)
	}
	if got := git(t, repo, "config", "branch."+wt.Branch+".remote"); got != "origin" {
		t.Errorf("upstream remote %q", got)
	}
	if err := Push(t.Context(), repo, "--upload-pack=evil", wt.Branch); err == nil {
		t.Error("an option as remote was accepted")
	}
	if err := Push(t.Context(), repo, "nowhere", wt.Branch); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("push to a missing remote: %v", err)
	}
	// A pushed branch loses nothing when removed: its commits are on a
	// remote-tracking ref.
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Errorf("Remove of a pushed worker: %v", err)
	}
}
