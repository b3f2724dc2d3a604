package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// Marks are set and released while other workers' worktrees are being
// added, as when a fleet starts several workers and the quick ones settle
// at once. git's worktree commands read the half-written directories of
// the ones being added and fail; a release lost that way left a settled
// worker refused by every landing command as still running.
func TestRunningMarksWhileWorktreesAreAdded(t *testing.T) {
	repo, m, first := newWorker(t, map[string]string{"a.txt": "a\n"})
	marked := []string{first.Path}
	for i := 2; i <= 4; i++ {
		wt, err := m.Create(t.Context(), fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		marked = append(marked, wt.Path)
	}
	const adders, each = 4, 4
	var adding, marking sync.WaitGroup
	done := make(chan struct{})
	addErrs := make([]error, adders)
	for a := range adders {
		adding.Add(1)
		go func() {
			defer adding.Done()
			for i := range each {
				if _, err := m.Create(t.Context(), fmt.Sprintf("n%d-%d", a, i)); err != nil {
					addErrs[a] = err
					return
				}
			}
		}()
	}
	markErrs := make([]error, len(marked))
	rounds := make([]int, len(marked))
	for i, path := range marked {
		marking.Add(1)
		go func() {
			defer marking.Done()
			for {
				if err := MarkRunning(t.Context(), path, "w"); err != nil {
					markErrs[i] = err
					return
				}
				if err := UnmarkRunning(t.Context(), path); err != nil {
					markErrs[i] = err
					return
				}
				rounds[i]++
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	adding.Wait()
	close(done)
	marking.Wait()
	for _, err := range addErrs {
		if err != nil {
			t.Errorf("add a worktree: %v", err)
		}
	}
	for i, err := range markErrs {
		if err != nil {
			t.Errorf("%s after %d rounds: %v", marked[i], rounds[i], err)
		}
	}
	_, list, err := FleetBranches(t.Context(), repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		if b.Running != "" {
			t.Errorf("%s still marked running: %s", b.Worker, b.Running)
		}
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
