package worktree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A running worker's worktree is kept even by a forced Remove or Prune,
// and other processes see the mark; once released it goes as usual.
func TestRunningMarkProtectsTheWorktree(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	if err := SetBranchNote(t.Context(), repo, wt.Branch, NoteTask, "t1: echo hi"); err != nil {
		t.Fatal(err)
	}
	if err := MarkRunning(t.Context(), wt.Path, "w1"); err != nil {
		t.Fatal(err)
	}
	// Marking again (a resumed run) replaces the mark.
	if err := MarkRunning(t.Context(), wt.Path, "w1"); err != nil {
		t.Fatal(err)
	}
	_, list, err := FleetBranches(t.Context(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Worker != "w1" || list[0].Session != "s" || list[0].Path != wt.Path ||
		!strings.Contains(list[0].Running, "w1") || list[0].Task != "t1: echo hi" {
		t.Fatalf("FleetBranches: %+v", list)
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{Force: true, DeleteBranch: true}); !errors.Is(err, ErrRunning) {
		t.Fatalf("forced Remove of a running worker's worktree: %v, want ErrRunning", err)
	}
	removed, skipped, err := Prune(t.Context(), repo, filepath.Dir(m.Root()), PruneOptions{Force: true})
	if err != nil || len(removed) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0], "running") {
		t.Fatalf("forced Prune: removed %q skipped %q err %v", removed, skipped, err)
	}
	if !exists(wt.Path) {
		t.Fatal("the running worktree was removed")
	}
	if err := UnmarkRunning(t.Context(), wt.Path); err != nil {
		t.Fatal(err)
	}
	if _, list, _ = FleetBranches(t.Context(), repo); list[0].Running != "" {
		t.Fatalf("mark still seen: %+v", list[0])
	}
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove after the mark was released: %v", err)
	}
}

// A mark left by a process that died does not count.
func TestStaleRunningMark(t *testing.T) {
	repo, m, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	git(t, repo, "worktree", "lock", "--reason", runningMark+"w1 (pid 999999999)", wt.Path)
	_, list, err := FleetBranches(t.Context(), repo)
	if err != nil || list[0].Running != "" {
		t.Fatalf("a dead process's mark counts as running: %+v %v", list, err)
	}
	// It is not a lock that needs forcing either: a clean, landed worktree goes.
	if err := m.Remove(t.Context(), "w1", RemoveOptions{}); err != nil {
		t.Fatalf("Remove under a stale mark: %v", err)
	}
	if _, err := os.Stat(wt.Path); err == nil {
		t.Fatal("worktree still there")
	}
}

func TestFingerprintFollowsRefs(t *testing.T) {
	repo, _, wt := newWorker(t, map[string]string{"a.txt": "a\n"})
	a, err := Fingerprint(t.Context(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Fingerprint(t.Context(), repo); b != a {
		t.Fatal("fingerprint changed with nothing moving")
	}
	commitFiles(t, wt.Path, "work", map[string]string{"b.txt": "b\n"})
	if b, _ := Fingerprint(t.Context(), repo); b == a {
		t.Fatal("fingerprint did not change when the worker's branch moved")
	}
}
