// Package landing is the path from "a worker finished" to "the change is on
// my branch": a worker's git state as the socket shows it, the commit
// messages the fleet writes, and the merge, apply and pull-request flows
// with the words the operator is told. The fleet's /diff and /merge and the
// command line's fleet diff, log, merge, apply and pr share it; the git
// mechanics are package worktree's (docs/landing-work.md).
package landing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/worktree"
)

// Worker is one worker's branch in a repository.
type Worker struct {
	Repo    string // the repository's top level
	Branch  string // fleet/<session>/<worker>
	Session string
	Name    string // the worker id, e.g. w3
	Path    string // its worktree; "" when it has none
	Task    string // the task recorded on the branch ("t3: …"); may be ""
}

// Of returns the Worker of a branch FleetBranches found in repo.
func Of(repo string, fb worktree.FleetBranch) Worker {
	w := Worker{Repo: repo, Branch: fb.Branch, Session: fb.Session, Name: fb.Worker, Task: fb.Task}
	if !fb.Missing {
		w.Path = fb.Path
	}
	return w
}

// Wire is st as the socket carries it (fleetState workers[].git).
func Wire(st worktree.State) *protocol.WorkerGit {
	g := &protocol.WorkerGit{
		Branch: st.Branch, Head: st.Head, BaseBranch: st.BaseBranch, BaseCommit: st.BaseCommit,
		Ahead: int64(st.Ahead), Behind: int64(st.Behind), Uncommitted: int64(st.Uncommitted),
		FilesChanged: int64(st.FilesTotal), LinesAdded: int64(st.Added), LinesRemoved: int64(st.Removed),
		Mergeable: st.Mergeable, Merged: st.Merged, MergedInto: st.MergedInto,
		WorktreeMissing: st.Missing, UpdatedAt: time.Now().UnixMilli(),
	}
	for i, f := range st.Files {
		if i == protocol.MaxWorkerGitFiles {
			break
		}
		g.Files = append(g.Files, protocol.WorkerGitFile{
			Path: f.Path, Status: f.Status, Added: int64(f.Added), Removed: int64(f.Removed), Binary: f.Binary,
		})
	}
	if len(st.Conflicts) > 0 {
		g.Conflicts = st.Conflicts[:min(len(st.Conflicts), protocol.MaxWorkerGitFiles)]
	}
	return g
}

// maxSubject bounds a commit subject or pull-request title.
const maxSubject = 72

// maxTaskBody bounds the task text a commit message or PR body quotes.
const maxTaskBody = 4 << 10

// TaskNote is the task as recorded on the worker's branch: "t3: " and the
// first line of its text.
func TaskNote(taskID, task string) string {
	return strings.TrimSpace(taskID + ": " + firstLine(task, 200))
}

// Settled describes how a worker's task ended, for its commit message.
type Settled struct {
	TaskID, Task    string
	Worker          string
	Provider, Model string
	Session         string
	Failed          bool
	Reason          string
	// Landing, when set, says the work is committed as it is landed (the
	// worker left it uncommitted) instead of how the task ended.
	Landing string
}

// CommitMessage is the message of the commit the fleet makes on a worker's
// branch when it settles: the task as the subject and body, then trailers
// saying who did it and how it ended.
func CommitMessage(s Settled) string {
	var b strings.Builder
	b.WriteString(subject(s.TaskID, s.Task))
	if body := strings.TrimSpace(s.Task); strings.Contains(body, "\n") || len(body) > maxSubject {
		b.WriteString("\n\n")
		b.WriteString(truncate(body, maxTaskBody))
	}
	b.WriteString("\n\n")
	agent := s.Provider
	if s.Model != "" {
		agent += ", model " + s.Model
	}
	if agent != "" {
		fmt.Fprintf(&b, "Fleet-Worker: %s (%s)\n", s.Worker, agent)
	} else {
		fmt.Fprintf(&b, "Fleet-Worker: %s\n", s.Worker)
	}
	if s.Session != "" {
		fmt.Fprintf(&b, "Fleet-Session: %s\n", s.Session)
	}
	switch {
	case s.Landing != "":
		fmt.Fprintf(&b, "Fleet-Committed-By: %s\n", s.Landing)
	case s.Failed:
		fmt.Fprintf(&b, "Fleet-Outcome: failed: %s\n", firstLine(s.Reason, 200))
	default:
		b.WriteString("Fleet-Outcome: completed\n")
	}
	return b.String()
}

// subject is "t3: <first line of the task>", at most maxSubject runes.
func subject(taskID, task string) string {
	s := firstLine(task, maxSubject)
	if taskID != "" {
		s = firstLine(taskID+": "+s, maxSubject)
	}
	if s == "" {
		s = "Work of a fleet worker"
	}
	return s
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return truncate(s, max)
}

// truncate cuts s to max runes, marking the cut with "…".
func truncate(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// taskOf splits a recorded task note "t3: text" into its id and text.
func taskOf(note string) (id, text string) {
	id, text, ok := strings.Cut(note, ": ")
	if !ok || strings.ContainsAny(id, " \t") {
		return "", note
	}
	return id, text
}

// commitPending commits w's uncommitted work on its branch before it is
// landed; the operator asked for the landing, so nothing happens behind
// their back. It says whether there was any.
func commitPending(ctx context.Context, w Worker, by string) (bool, error) {
	if w.Path == "" {
		return false, nil
	}
	id, text := taskOf(w.Task)
	sha, err := worktree.CommitAll(ctx, w.Path, CommitMessage(Settled{TaskID: id, Task: text, Worker: w.Name, Session: w.Session, Landing: by}))
	if err != nil {
		return false, fmt.Errorf("commit %s's uncommitted changes first: %w", w.Name, err)
	}
	return sha != "", nil
}

// Merge lands w into its base branch (or o.Into), first committing what
// its worktree has uncommitted. The error, when it refuses, says why and
// that nothing was changed. The caller makes sure the worker is not
// running.
func Merge(ctx context.Context, w Worker, mode worktree.MergeMode, into string) (string, error) {
	st, err := worktree.ReadState(ctx, w.Repo, w.Branch, w.Path)
	if err != nil {
		return "", fmt.Errorf("read %s's state: %w", w.Name, err)
	}
	target := into
	if target == "" {
		target = st.BaseBranch
	}
	if target == "" {
		return "", fmt.Errorf("%s has no base branch recorded (the fleet started on a detached HEAD): name the target with --into BRANCH", w.Name)
	}
	// What would refuse is checked before the uncommitted work is
	// committed, so a refusal changes nothing, the worker's branch included.
	if err := worktree.CheckTarget(ctx, w.Repo, target); err != nil {
		return "", refusal(w, target, err)
	}
	if st.Uncommitted > 0 && target == st.BaseBranch && st.Mergeable != nil && !*st.Mergeable {
		return "", refusal(w, target, &worktree.ConflictError{Branch: w.Branch, Target: target, Files: st.Conflicts, Total: len(st.Conflicts)})
	}
	committed, err := commitPending(ctx, w, "fleet merge")
	if err != nil {
		return "", err
	}
	if committed {
		if st, err = worktree.ReadState(ctx, w.Repo, w.Branch, w.Path); err != nil {
			return "", fmt.Errorf("read %s's state: %w", w.Name, err)
		}
	}
	res, err := worktree.Merge(ctx, w.Repo, w.Branch, w.Path, worktree.MergeOptions{
		Mode: mode, Into: target, Message: mergeMessage(w, mode, st),
	})
	if err != nil {
		return "", refusal(w, target, err)
	}
	var b strings.Builder
	if committed {
		fmt.Fprintf(&b, "Committed %s's uncommitted changes on %s first. ", w.Name, w.Branch)
	}
	what := fmt.Sprintf("%s (%s: %d commit(s), %d file(s) +%d -%d)", w.Name, w.Branch, st.Ahead, st.FilesTotal, st.Added, st.Removed)
	switch res.Mode {
	case worktree.Squash:
		fmt.Fprintf(&b, "Squashed %s into %s as %s.", what, res.Into, short(res.Commit))
	case worktree.Rebase:
		fmt.Fprintf(&b, "Rebased %s onto %s; %s is now at %s.", what, res.Into, res.Into, short(res.Commit))
	default:
		fmt.Fprintf(&b, "Merged %s into %s: merge commit %s.", what, res.Into, short(res.Commit))
	}
	return b.String(), nil
}

// mergeMessage is the merge or squash commit's message.
func mergeMessage(w Worker, mode worktree.MergeMode, st worktree.State) string {
	id, text := taskOf(w.Task)
	var b strings.Builder
	if mode == worktree.Squash {
		b.WriteString(subject(id, text))
	} else {
		b.WriteString(firstLine("Merge fleet worker "+w.Name+": "+subject(id, text), maxSubject))
	}
	if strings.TrimSpace(text) != "" {
		b.WriteString("\n\n" + truncate(strings.TrimSpace(text), maxTaskBody))
	}
	fmt.Fprintf(&b, "\n\nFleet-Branch: %s\nFleet-Worker: %s\n", w.Branch, w.Name)
	if w.Session != "" {
		fmt.Fprintf(&b, "Fleet-Session: %s\n", w.Session)
	}
	return b.String()
}

// refusal words a landing error for the operator.
func refusal(w Worker, target string, err error) error {
	var ce *worktree.ConflictError
	var de *worktree.DirtyError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("refused to merge %s: %w. Bring the branch up to date first (for example /tell %s to rebase on %s), or resolve it by hand", w.Name, err, w.Name, target)
	case errors.As(err, &de):
		return fmt.Errorf("refused to merge %s: %w", w.Name, err)
	case errors.Is(err, worktree.ErrNothingToLand):
		return fmt.Errorf("%s has nothing to merge: %s has no changes that %s lacks", w.Name, w.Branch, target)
	}
	return fmt.Errorf("could not merge %s into %s: %w", w.Name, target, err)
}

// Apply puts w's change (only paths, when given) into the work tree at dir
// as uncommitted changes and says what it changed.
func Apply(ctx context.Context, dir string, w Worker, paths []string) (string, error) {
	files, err := worktree.Apply(ctx, dir, w.Repo, w.Branch, w.Path, paths)
	var ce *worktree.ConflictError
	switch {
	case errors.As(err, &ce):
		return "", fmt.Errorf("refused to apply %s: %w", w.Name, err)
	case errors.Is(err, worktree.ErrNothingToLand):
		if len(paths) > 0 {
			return "", fmt.Errorf("%s changed none of %s", w.Name, strings.Join(paths, ", "))
		}
		return "", fmt.Errorf("%s has nothing to apply: %s has no changes against its base", w.Name, w.Branch)
	case err != nil:
		return "", fmt.Errorf("could not apply %s: %w", w.Name, err)
	}
	return fmt.Sprintf("Applied %s's change to %s (uncommitted, not staged): %s", w.Name, dir, strings.Join(files, ", ")), nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
