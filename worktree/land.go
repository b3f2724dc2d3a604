package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNothingToLand: the branch (or the part of it asked for) changes
// nothing against its base or target.
var ErrNothingToLand = errors.New("nothing to land: the branch has no changes against its base")

// ConflictError: the merge, rebase or apply would conflict; nothing was
// changed.
type ConflictError struct {
	Branch string   // the worker branch
	Target string   // the target branch (Merge) or work tree (Apply)
	Files  []string // the conflicting files, sorted; at most MaxStateFiles
	Total  int      // how many files conflict; 0 when git named none
	op     string   // "merging", "rebasing" or "applying"
	detail string   // git's words, when it named no file
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	switch e.op {
	case "applying":
		fmt.Fprintf(&b, "applying %s to %s", e.Branch, e.Target)
	case "rebasing":
		fmt.Fprintf(&b, "rebasing %s onto %s", e.Branch, e.Target)
	default:
		fmt.Fprintf(&b, "merging %s into %s", e.Branch, e.Target)
	}
	b.WriteString(" would conflict")
	if len(e.Files) > 0 {
		b.WriteString(" in ")
		b.WriteString(fileList(e.Files, e.Total))
	} else if e.detail != "" {
		b.WriteString(" (" + e.detail + ")")
	}
	b.WriteString("; nothing was changed")
	return b.String()
}

// DirtyError: a work tree has changes that block landing; nothing was
// changed.
type DirtyError struct {
	Path  string   // the work tree
	Files []string // sorted; at most MaxStateFiles
	Total int      // how many files
	// Untracked: the files are untracked ones the merge would overwrite
	// (else they are uncommitted changes).
	Untracked bool
}

func (e *DirtyError) Error() string {
	if e.Untracked {
		return fmt.Sprintf("untracked files in %s would be overwritten: %s; move or remove them and retry; nothing was changed",
			e.Path, fileList(e.Files, e.Total))
	}
	return fmt.Sprintf("%s has uncommitted changes in %s; commit or stash them first; nothing was changed",
		e.Path, fileList(e.Files, e.Total))
}

// fileList joins up to 10 names, saying how many more there are of total.
func fileList(files []string, total int) string {
	const shown = 10
	total = max(total, len(files))
	if len(files) > shown {
		files = files[:shown]
	}
	s := strings.Join(files, ", ")
	if more := total - len(files); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// fallbackIdentity is who commits when git has no identity configured.
var fallbackIdentity = [2]string{"agents-fleet", "agents-fleet@localhost"}

// identityEnv returns the environment that gives git an author and a
// committer: none when they are configured, the fallback identity for
// whichever is not (git var fails then, as git commit would).
func identityEnv(ctx context.Context, dir string) ([]string, error) {
	var env []string
	for _, who := range []string{"AUTHOR", "COMMITTER"} {
		if _, err := runGitWith(ctx, dir, gitRun{max: 4 << 10}, "var", "GIT_"+who+"_IDENT"); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			env = append(env, "GIT_"+who+"_NAME="+fallbackIdentity[0], "GIT_"+who+"_EMAIL="+fallbackIdentity[1])
		}
	}
	return env, nil
}

// CommitAll commits every change in the worktree at path (git add -A, then
// git commit --no-verify, never signed) with message. Without a configured
// identity it commits as "agents-fleet <agents-fleet@localhost>". It
// returns the new commit, or "" when there was nothing to commit.
func CommitAll(ctx context.Context, path, message string) (string, error) {
	if strings.TrimSpace(message) == "" {
		message = "agents-fleet: commit the work"
	}
	err := retryLocked(ctx, gitAttempts, func() error {
		_, err := runGit(ctx, path, "add", "-A")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", path, err)
	}
	if _, err := runGit(ctx, path, "diff", "--cached", "--quiet", "--ignore-submodules=none"); err == nil {
		return "", nil
	} else if exitCode(err) != 1 || ctx.Err() != nil {
		return "", fmt.Errorf("commit %s: %w", path, err)
	}
	env, err := identityEnv(ctx, path)
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", path, err)
	}
	err = retryLocked(ctx, gitAttempts, func() error {
		_, err := runGitWith(ctx, path, gitRun{env: env, stdin: strings.NewReader(message), max: 64 << 10},
			"-c", "commit.gpgSign=false", "commit", "--no-verify", "--quiet", "--file=-")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", path, err)
	}
	head, err := resolveCommit(ctx, path, "HEAD")
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", path, err)
	}
	return head, nil
}

// DiffOptions select what Diff writes.
type DiffOptions struct {
	Stat  bool     // --stat instead of the patch
	Color bool     // --color=always (else --no-color)
	Paths []string // limit to these repository paths, taken literally
}

// Diff writes the worker's change against its base (State.BaseCommit),
// committed and uncommitted (untracked files included), to w. An empty
// change writes nothing.
func Diff(ctx context.Context, w io.Writer, repo, branch, path string, o DiffOptions) error {
	wk, err := readWork(ctx, repo, branch, path, true)
	if err != nil {
		return fmt.Errorf("diff %s: %w", branch, err)
	}
	from := wk.reviewBase(ctx, repo)
	if from == wk.commit {
		return nil
	}
	args := []string{"diff", colorFlag(o.Color), "--no-ext-diff", "--no-relative"}
	if o.Stat {
		args = append(args, "--stat")
	}
	args = append(append(args, from, wk.commit, "--"), literal(o.Paths)...)
	if _, err := runGitWith(ctx, repo, gitRun{stdout: w}, args...); err != nil {
		return fmt.Errorf("diff %s: %w", branch, err)
	}
	return nil
}

// Log writes the log of the branch's own commits (BaseCommit..tip), each
// with its --stat, to w.
func Log(ctx context.Context, w io.Writer, repo, branch string, color bool) error {
	wk, err := readWork(ctx, repo, branch, "", false)
	if err != nil {
		return fmt.Errorf("log %s: %w", branch, err)
	}
	from := wk.reviewBase(ctx, repo)
	if from == wk.tip {
		return nil
	}
	_, err = runGitWith(ctx, repo, gitRun{stdout: w},
		"log", colorFlag(color), "--stat", "--no-ext-diff", "--no-relative", from+".."+wk.tip, "--")
	if err != nil {
		return fmt.Errorf("log %s: %w", branch, err)
	}
	return nil
}

// reviewBase is what Diff and Log compare the work with: the merge-base
// with the base branch, except once the work is in the base branch (merged,
// so the merge-base is the tip): then the commit the worker started from,
// so that a merged worker's change can still be reviewed.
func (wk *work) reviewBase(ctx context.Context, repo string) string {
	if wk.fork != wk.tip || wk.meta.start == "" || wk.meta.start == wk.tip {
		return wk.fork
	}
	if in, err := isAncestor(ctx, repo, wk.meta.start, wk.tip); err == nil && in {
		return wk.meta.start
	}
	return wk.fork
}

func colorFlag(on bool) string {
	if on {
		return "--color=always"
	}
	return "--no-color"
}

// literal turns repository paths into pathspecs git takes as they are,
// from the top of the work tree whatever directory it runs in.
func literal(paths []string) []string {
	specs := make([]string, 0, len(paths))
	for _, p := range paths {
		specs = append(specs, ":(top,literal)"+filepath.ToSlash(p))
	}
	return specs
}

// MergeMode is how Merge lands a branch.
type MergeMode string

const (
	MergeCommit MergeMode = "merge"  // a merge commit with the target and the tip as parents
	Squash      MergeMode = "squash" // one commit with the merge's tree, the target its parent
	Rebase      MergeMode = "rebase" // the branch's commits replayed onto the target
)

// MergeOptions say how and where Merge lands a branch.
type MergeOptions struct {
	Mode    MergeMode // default MergeCommit
	Into    string    // target branch short name; default the branch's BaseBranch
	Message string    // message of the merge or squash commit; the default names the branch
}

// MergeResult is what Merge did.
type MergeResult struct {
	Into       string
	Commit     string // the target's new tip
	Mode       MergeMode
	Files      []string // files the merge changed in the target, sorted; at most MaxStateFiles
	FilesTotal int      // how many files it changed
}

// landMu serialises Merge in this process, so workers landed at once go in
// one after the other instead of failing on the target having moved.
var landMu sync.Mutex

// Merge lands branch into the target branch. It refuses, changing nothing,
// when the worktree at path has uncommitted changes (a DirtyError: commit
// them first), when there is nothing to land (ErrNothingToLand), when the
// target does not exist, when the target is checked out in a work tree with
// uncommitted changes to tracked files (a DirtyError; untracked files alone
// do not refuse), or when the merge would conflict (a ConflictError).
//
// It builds the result without touching any work tree (merge-tree and
// commit-tree; a rebase replays the commits in a temporary worktree), then
// advances the target: by `git merge --ff-only` in the work tree that has
// it checked out, which refuses when untracked files would be overwritten
// (a DirtyError with Untracked), or else by a compare-and-swap update-ref.
// Either leaves the target and its work tree as they were when it fails.
// Last it records branch.<branch>.fleetMerged and fleetMergedInto.
func Merge(ctx context.Context, repo, branch, path string, o MergeOptions) (MergeResult, error) {
	res, err := merge(ctx, repo, branch, path, o)
	var ce *ConflictError
	var de *DirtyError
	if err != nil && !errors.As(err, &ce) && !errors.As(err, &de) && !errors.Is(err, ErrNothingToLand) {
		err = fmt.Errorf("merge %s: %w", branch, err)
	}
	return res, err
}

func merge(ctx context.Context, repo, branch, path string, o MergeOptions) (MergeResult, error) {
	mode := o.Mode
	if mode == "" {
		mode = MergeCommit
	}
	if mode != MergeCommit && mode != Squash && mode != Rebase {
		return MergeResult{}, fmt.Errorf("unknown merge mode %q: want merge, squash or rebase", mode)
	}
	landMu.Lock()
	defer landMu.Unlock()

	w, err := readWork(ctx, repo, branch, path, false)
	if err != nil {
		return MergeResult{}, err
	}
	if w.dirtyErr != nil {
		return MergeResult{}, w.dirtyErr
	}
	into := o.Into
	if into == "" {
		if into = w.meta.base; into == "" {
			return MergeResult{}, errors.New("no target branch: the branch records no base branch; name one")
		}
	}
	if into == branch {
		return MergeResult{}, fmt.Errorf("cannot merge %s into itself", branch)
	}
	res := MergeResult{Into: into, Mode: mode}
	old, err := resolveCommit(ctx, repo, "refs/heads/"+into)
	if err != nil {
		return res, err
	}
	if old == "" {
		return res, fmt.Errorf("target branch %s: %w", into, fs.ErrNotExist)
	}
	if w.tip == w.meta.start {
		return res, ErrNothingToLand
	}
	if in, err := isAncestor(ctx, repo, w.tip, old); err != nil {
		return res, err
	} else if in {
		return res, ErrNothingToLand
	}
	target, err := checkedOut(ctx, repo, into)
	if err != nil {
		return res, err
	}
	if target != "" {
		files, total, err := statusFiles(ctx, target, false)
		if err != nil {
			return res, err
		}
		if total > 0 {
			return res, &DirtyError{Path: target, Files: files, Total: total}
		}
	}
	tree, conflicts, total, err := mergeTree(ctx, repo, old, w.tip)
	if err != nil {
		return res, err
	}
	if total > 0 {
		return res, &ConflictError{Branch: branch, Target: into, Files: conflicts, Total: total}
	}
	if oldTree, err := gitLine(ctx, repo, "rev-parse", old+"^{tree}"); err != nil {
		return res, err
	} else if oldTree == tree {
		return res, ErrNothingToLand // its changes are in the target already
	}
	env, err := identityEnv(ctx, repo)
	if err != nil {
		return res, err
	}
	var next string
	switch mode {
	case MergeCommit:
		msg := o.Message
		if strings.TrimSpace(msg) == "" {
			msg = fmt.Sprintf("Merge branch '%s' into %s\n", branch, into)
		}
		next, err = commitTree(ctx, repo, env, tree, msg, old, w.tip)
	case Squash:
		msg := o.Message
		if strings.TrimSpace(msg) == "" {
			if msg, err = squashMessage(ctx, repo, branch, into, old, w.tip); err != nil {
				return res, err
			}
		}
		next, err = commitTree(ctx, repo, env, tree, msg, old)
	case Rebase:
		next, err = rebaseOnto(ctx, repo, branch, into, old, w.tip, env)
	}
	if err != nil {
		return res, err
	}
	if err := advance(ctx, repo, target, into, old, next, branch); err != nil {
		return res, err
	}
	res.Commit = next
	// The target has moved: from here on, failures are reported with the
	// result, which is real.
	if res.Files, res.FilesTotal, err = diffNames(ctx, repo, old, next, []string{"--ignore-submodules=none"}, nil, MaxStateFiles); err != nil {
		return res, err
	}
	if err := setConfig(ctx, repo, branch, keyMerged, w.tip); err != nil {
		return res, fmt.Errorf("landed in %s, but recording it failed: %w", into, err)
	}
	if err := setConfig(ctx, repo, branch, keyMergedInto, into); err != nil {
		return res, fmt.Errorf("landed in %s, but recording it failed: %w", into, err)
	}
	return res, nil
}

// checkedOut returns the work tree that has branch checked out, "" when
// none does (or its directory is gone).
func checkedOut(ctx context.Context, repo, branch string) (string, error) {
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.branch == "refs/heads/"+branch && !e.bare && !e.prunable && isDir(e.path) {
			return e.path, nil
		}
	}
	return "", nil
}

// commitTree makes a commit of tree with parents and message, signed never.
func commitTree(ctx context.Context, dir string, env []string, tree, message string, parents ...string) (string, error) {
	args := []string{"-c", "commit.gpgSign=false", "commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := runGitWith(ctx, dir, gitRun{env: env, stdin: strings.NewReader(message), max: 4 << 10}, args...)
	return strings.TrimSpace(string(out)), err
}

// squashMessage names the branch and lists its commits' subjects.
func squashMessage(ctx context.Context, dir, branch, into, old, tip string) (string, error) {
	const maxSubjects = 50
	var b strings.Builder
	fmt.Fprintf(&b, "Squash branch '%s' into %s\n\n", branch, into)
	n := 0
	err := gitFields(ctx, dir, 0, func(s string) error {
		if n++; n <= maxSubjects {
			b.WriteString("* " + strings.TrimSpace(s) + "\n")
		}
		return nil
	}, "log", "-z", "--reverse", "--format=%s", old+".."+tip, "--")
	if n > maxSubjects {
		fmt.Fprintf(&b, "* … and %d more\n", n-maxSubjects)
	}
	return b.String(), err
}

// rebaseOnto replays the commits of tip that old lacks onto old in a
// temporary detached worktree, removed afterwards, and returns the new
// tip. On a conflict the rebase is aborted and a ConflictError returned.
func rebaseOnto(ctx context.Context, repo, branch, into, old, tip string, env []string) (string, error) {
	tmp, err := os.MkdirTemp("", "fleet-rebase-*")
	if err != nil {
		return "", err
	}
	wt := filepath.Join(tmp, "wt")
	// tmp holds only wt: as hooksPath it has no hooks, so none of the
	// user's run for this throwaway checkout.
	noHooks := []string{"-c", "core.hooksPath=" + tmp}
	defer func() {
		// Clean up even when ctx is done.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		retryLocked(cctx, gitAttempts, func() error {
			_, err := runGit(cctx, repo, "worktree", "remove", "--force", "--force", wt)
			if err != nil && !isDir(wt) {
				return nil // never made
			}
			return err
		})
		os.RemoveAll(tmp)
	}()
	err = retryLocked(ctx, gitAttempts, func() error {
		_, err := runGit(ctx, repo, slices.Concat(noHooks, []string{"worktree", "add", "--detach", "--quiet", wt, tip})...)
		return err
	})
	if err != nil {
		return "", err
	}
	upstream, err := mergeBase(ctx, repo, old, tip)
	if err != nil {
		return "", err
	}
	args := slices.Concat(noHooks, []string{"-c", "commit.gpgSign=false", "-c", "rerere.enabled=false", "-c", "rebase.autoStash=false",
		"rebase", "--quiet", "--no-verify", "--no-update-refs", "--no-autosquash", "--onto", old})
	if upstream != "" {
		args = append(args, upstream)
	} else {
		args = append(args, "--root")
	}
	_, rerr := runGitWith(ctx, wt, gitRun{env: env, max: 64 << 10}, args...)
	if rerr == nil {
		return resolveCommit(ctx, wt, "HEAD")
	}
	if ctx.Err() != nil {
		return "", rerr
	}
	files, total, err := diffNames(ctx, wt, "", "", []string{"--diff-filter=U"}, nil, MaxStateFiles)
	runGit(ctx, wt, "rebase", "--abort") // the worktree goes anyway; this only tidies its state
	if err != nil || total == 0 {
		return "", fmt.Errorf("rebasing %s onto %s failed; nothing was changed: %w", branch, into, rerr)
	}
	return "", &ConflictError{Branch: branch, Target: into, Files: files, Total: total, op: "rebasing"}
}

// advance moves branch from old to next, a descendant. In the work tree
// that has it checked out that is a fast-forward merge, which changes
// nothing when it fails; elsewhere a compare-and-swap of the ref.
func advance(ctx context.Context, repo, target, branch, old, next, from string) error {
	if target == "" {
		return retryLocked(ctx, gitAttempts, func() error {
			_, err := runGit(ctx, repo, "update-ref", "-m", "fleet: land "+from, "refs/heads/"+branch, next, old)
			return err
		})
	}
	err := retryLocked(ctx, gitAttempts, func() error {
		_, err := runGitWith(ctx, target, gitRun{max: 1 << 20},
			"merge", "--ff-only", "--no-autostash", "--no-verify-signatures", "--quiet", "--no-stat", next)
		return err
	})
	if err == nil {
		return nil
	}
	var ge *GitError
	if !errors.As(err, &ge) || ctx.Err() != nil {
		return err
	}
	if files := overwritten(ge.Stderr, "untracked working tree files"); len(files) > 0 {
		return &DirtyError{Path: target, Files: files, Total: len(files), Untracked: true}
	}
	if files := overwritten(ge.Stderr, "local changes"); len(files) > 0 {
		return &DirtyError{Path: target, Files: files, Total: len(files)}
	}
	if now, _ := resolveCommit(ctx, repo, "refs/heads/"+branch); now != old {
		return fmt.Errorf("%s moved while landing; nothing was changed, try again: %w", branch, err)
	}
	return err
}

// overwritten parses the files git merge lists, one per tab-indented line,
// after its "The following <what> ... would be overwritten" line.
func overwritten(stderr, what string) []string {
	var files []string
	in := false
	for line := range strings.SplitSeq(stderr, "\n") {
		switch {
		case strings.Contains(line, what) && strings.Contains(line, "would be overwritten"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			if len(files) < MaxStateFiles {
				files = append(files, unquote(strings.TrimPrefix(line, "\t")))
			}
		default:
			in = false
		}
	}
	slices.Sort(files)
	return files
}

// unquote undoes git's C-style quoting of an unusual path.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// diffNames lists the paths that differ between commits from and to (both
// "": the work tree at dir against its index), with extra options and
// limited to pathspecs specs, sorted, at most limit of them, and how many
// there are.
func diffNames(ctx context.Context, dir, from, to string, extra, specs []string, limit int) (files []string, total int, err error) {
	args := append([]string{"diff", "--name-only", "-z", "--no-renames", "--no-relative", "--no-ext-diff"}, extra...)
	if from != "" {
		args = append(args, from, to)
	}
	args = append(append(args, "--"), specs...)
	err = gitFields(ctx, dir, 0, func(f string) error {
		total++
		if len(files) < limit {
			files = append(files, f)
		}
		return nil
	}, args...)
	slices.Sort(files)
	return files, total, err
}

// maxPatch bounds the patch Apply stages in a temporary file.
const maxPatch = 1 << 30

// maxApplied bounds the file list Apply returns.
const maxApplied = 10000

// Apply puts the worker's change (committed and uncommitted, against
// BaseCommit; only paths when given) into the work tree containing dir as
// uncommitted changes, leaving its index alone: `git diff --binary` into
// `git apply --check`, then `git apply`. When it does not apply cleanly
// it changes nothing and returns a ConflictError. It returns the files it
// changed; ErrNothingToLand when the change is empty.
func Apply(ctx context.Context, dir, repo, branch, path string, paths []string) ([]string, error) {
	files, err := apply(ctx, dir, repo, branch, path, paths)
	var ce *ConflictError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, ErrNothingToLand) {
		err = fmt.Errorf("apply %s: %w", branch, err)
	}
	return files, err
}

func apply(ctx context.Context, dir, repo, branch, path string, paths []string) ([]string, error) {
	top, err := toplevel(ctx, dir)
	if err != nil {
		return nil, err
	}
	w, err := readWork(ctx, repo, branch, path, true)
	if err != nil {
		return nil, err
	}
	if w.fork == w.commit {
		return nil, ErrNothingToLand
	}
	specs := literal(paths)
	// Submodule commits cannot be applied to a work tree; they are left out.
	files, total, err := diffNames(ctx, repo, w.fork, w.commit, []string{"--ignore-submodules=all"}, specs, maxApplied)
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, ErrNothingToLand
	}
	patch, err := os.CreateTemp("", "fleet-patch-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		patch.Close()
		os.Remove(patch.Name())
	}()
	// Fixed prefixes, no external diff or textconv: whatever the user's
	// diff configuration, git apply must be able to read it.
	args := []string{"diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--no-relative", "--no-renames",
		"--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/", w.fork, w.commit, "--"}
	limit := &limitWriter{w: patch, n: maxPatch}
	if _, err := runGitWith(ctx, repo, gitRun{stdout: limit}, append(args, specs...)...); err != nil {
		if limit.over {
			return nil, fmt.Errorf("the change is over %d bytes; merge it instead", maxPatch)
		}
		return nil, err
	}
	for _, check := range []bool{true, false} {
		if _, err := patch.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		args := []string{"apply", "--whitespace=nowarn"}
		if check {
			args = append(args, "--check")
		}
		_, err := runGitWith(ctx, top, gitRun{stdin: patch, max: 1 << 20}, args...)
		var ge *GitError
		if err != nil && errors.As(err, &ge) && ctx.Err() == nil {
			bad := applyFailures(ge.Stderr, files)
			return nil, &ConflictError{Branch: branch, Target: top, Files: bad, Total: len(bad), op: "applying", detail: ge.Stderr}
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// applyFailures picks the files git apply's errors name
// ("error: patch failed: <file>:<line>", "error: <file>: <reason>"),
// keeping only files of the patch.
func applyFailures(stderr string, files []string) []string {
	var bad []string
	for line := range strings.SplitSeq(stderr, "\n") {
		msg, ok := strings.CutPrefix(strings.TrimSpace(line), "error: ")
		if !ok {
			continue
		}
		var name string
		if rest, ok := strings.CutPrefix(msg, "patch failed: "); ok {
			if i := strings.LastIndexByte(rest, ':'); i > 0 {
				name = rest[:i]
			}
		} else if i := strings.LastIndex(msg, ": "); i > 0 {
			name = msg[:i]
		}
		name = unquote(name)
		if _, found := slices.BinarySearch(files, name); found && !slices.Contains(bad, name) && len(bad) < MaxStateFiles {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	return bad
}

// Push pushes branch to remote (git push --set-upstream), bounded by ctx.
func Push(ctx context.Context, repo, remote, branch string) error {
	if remote == "" || strings.HasPrefix(remote, "-") {
		return fmt.Errorf("push %s: invalid remote %q", branch, remote)
	}
	ref := "refs/heads/" + branch
	err := retryLocked(ctx, gitAttempts, func() error {
		_, err := runGitWith(ctx, repo, gitRun{max: 1 << 20}, "push", "--quiet", "--set-upstream", remote, ref+":"+ref)
		return err
	})
	if err != nil {
		return fmt.Errorf("push %s to %s: %w", branch, remote, err)
	}
	return nil
}

// CheckTarget checks, changing nothing, that branch into exists and, if it
// is checked out in a work tree, that the work tree has no uncommitted
// changes to tracked files (a DirtyError): what Merge would refuse before
// looking at the worker's side.
func CheckTarget(ctx context.Context, repo, into string) error {
	c, err := resolveCommit(ctx, repo, "refs/heads/"+into)
	if err != nil {
		return err
	}
	if c == "" {
		return fmt.Errorf("target branch %s: %w", into, fs.ErrNotExist)
	}
	target, err := checkedOut(ctx, repo, into)
	if err != nil || target == "" {
		return err
	}
	files, total, err := statusFiles(ctx, target, false)
	if err != nil {
		return err
	}
	if total > 0 {
		return &DirtyError{Path: target, Files: files, Total: total}
	}
	return nil
}
