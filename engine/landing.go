package engine

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// Lander is implemented by Workspaces whose workers' work lives on git
// branches and can be landed (docs/landing-work.md). It is optional:
// without it there is no git state, commit on settle, /diff or /merge.
type Lander interface {
	// GitState reads the worker's branch state.
	GitState(ctx context.Context, worker string) (*protocol.WorkerGit, error)
	// Fingerprint changes whenever a branch of the repository moves, so
	// settled workers' states are read again only then.
	Fingerprint(ctx context.Context) (string, error)
	// Started marks the worker's worktree as in use by a running worker
	// (so landing and clean-up commands outside the fleet leave it alone)
	// and records its task on the branch.
	Started(ctx context.Context, worker string, work Work) error
	// Settled commits the worktree's uncommitted changes on the branch
	// when commit is set, with a message naming the work ("" when there
	// were none), and drops the running mark.
	Settled(ctx context.Context, worker string, work Work, commit bool) (string, error)
	// Diff returns the worker's change against its base, at most max
	// bytes (truncated says it was cut).
	Diff(ctx context.Context, worker string, o DiffRequest, max int) (text string, truncated bool, err error)
	// Merge lands the worker's work and returns what to tell the operator.
	Merge(ctx context.Context, worker string, o MergeRequest, work Work) (string, error)
	// Apply puts the worker's change (only paths, when given) into the
	// repository's main work tree, uncommitted and unstaged, and returns
	// what to tell the operator.
	Apply(ctx context.Context, worker string, paths []string) (string, error)
	// PushCommand is the git push /pr would run, for the confirm policy.
	PushCommand(worker string) string
	// PR pushes the worker's branch and opens a pull request (or says how
	// to); it returns what to tell the operator.
	PR(ctx context.Context, worker string, draft bool, work Work) (string, error)
}

// Work describes what a worker did, for commit messages.
type Work struct {
	TaskID, Task      string
	Worker            string
	Provider, Model   string
	Failed            bool
	Reason            string // why it failed
	SessionID, Branch string
}

// DiffRequest is /diff's arguments.
type DiffRequest struct {
	Stat  bool
	Paths []string
}

// MergeRequest is /merge's arguments.
type MergeRequest struct {
	Mode string // "merge" (default), "squash", "rebase"
	Into string // target branch; default the worker's base branch
}

// RemoveOptions are /clean's switches.
type RemoveOptions struct {
	Force        bool // remove a dirty or unmerged worker's worktree (its branch stays)
	DeleteBranch bool // with Force, delete the branch too
}

// Git state refresh (docs/landing-work.md): running workers are read
// again when they did something, settled ones when a branch moved, every
// one at least every gitStateMaxAge.
const (
	defaultGitStateInterval = 2 * time.Second
	gitStateMaxAge          = time.Minute
	gitStateTimeout         = 30 * time.Second
)

// maxDiffReply bounds the diff text a /diff reply carries; fleet diff
// shows all of it.
const maxDiffReply = 48 << 10

func (e *Engine) lander() Lander {
	l, _ := e.cfg.Workspaces.(Lander)
	return l
}

// commitOnSettleLocked says whether w's uncommitted work is committed when
// it settles: as configured, else for agent providers only.
func (e *Engine) commitOnSettleLocked(w *worker) bool {
	if e.cfg.CommitOnSettle != nil {
		return *e.cfg.CommitOnSettle
	}
	p := e.providerLocked(w.provider)
	return p != nil && p.Name() != "local"
}

// workLocked describes t on w for commit messages.
func (e *Engine) workLocked(w *worker, t *task, res error) Work {
	wk := Work{TaskID: t.id, Task: t.command, Worker: w.id, Provider: e.agentTypeLocked(w), Model: w.model,
		SessionID: e.cfg.SessionID, Branch: w.branch}
	if res != nil {
		wk.Failed, wk.Reason = true, res.Error()
	}
	return wk
}

// finishWork runs between a worker's last turn and its settling, without
// e.mu: it commits the worker's uncommitted work on its branch (commit on
// settle) and releases the worktree's running mark. Then it settles.
func (e *Engine) finishWork(w *worker, t *task, res provider.TurnEnded) {
	l := e.lander()
	e.mu.Lock()
	has := l != nil && w.worktreePath != ""
	commit := has && e.commitOnSettleLocked(w)
	work := e.workLocked(w, t, res.Err)
	e.mu.Unlock()
	if has {
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		sha, err := l.Settled(ctx, w.id, work, commit)
		cancel()
		e.mu.Lock()
		switch {
		case err != nil:
			e.systemLineLocked(w.id, "Could not commit the worker's changes on its branch: "+err.Error())
		case sha != "":
			e.systemLineLocked(w.id, fmt.Sprintf("Committed the worker's changes on %s as %s.", w.branch, short(sha)))
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	w.gitStale = true
	e.mu.Unlock()
	e.settle(w, t, res)
}

// markRunning marks w's worktree as in use by t (see Lander.Started).
func (e *Engine) markRunning(w *worker, t *task) {
	l := e.lander()
	if l == nil {
		return
	}
	e.mu.Lock()
	work := e.workLocked(w, t, nil)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
	defer cancel()
	if err := l.Started(ctx, w.id, work); err != nil {
		e.log.Warn("mark the worktree in use", "worker", w.id, "err", err)
	}
}

// systemLineLocked shows text in w's transcript as a system line.
func (e *Engine) systemLineLocked(agent, text string) {
	e.pub.Broadcast(&protocol.Transcript{Role: protocol.RoleSystem, Text: text, Agent: agent, Ts: nowMs()})
}

// gitStateLoop keeps workers' git state current until Shutdown.
func (e *Engine) gitStateLoop(l Lander) {
	defer e.runWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.admitStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(e.cfg.GitStateInterval)
	defer tick.Stop()
	var lastFP string
	for {
		fp, err := e.refreshGitStates(ctx, l, lastFP)
		if err == nil {
			lastFP = fp
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refreshGitStates reads the state of every worker that is due and
// returns the repository fingerprint it went by.
func (e *Engine) refreshGitStates(ctx context.Context, l Lander, lastFP string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, gitStateTimeout)
	defer cancel()
	fp, err := l.Fingerprint(rctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("read the repository's branches", "err", err)
		}
		return "", err
	}
	now := time.Now()
	e.mu.Lock()
	var due []*worker
	for _, w := range e.workers {
		if w.branch == "" || w.cleaning {
			continue
		}
		if w.gitStale || fp != lastFP || now.Sub(w.gitAt) >= gitStateMaxAge {
			due = append(due, w)
			w.gitStale = false
		}
	}
	e.mu.Unlock()
	for _, w := range due {
		st, err := l.GitState(rctx, w.id)
		if ctx.Err() != nil {
			return fp, ctx.Err()
		}
		e.mu.Lock()
		w.gitAt = now
		if err != nil {
			e.log.Debug("read a worker's git state", "worker", w.id, "err", err)
			st = nil
		}
		if !sameGit(w.git, st) {
			w.git = st
			e.changedLocked()
		}
		e.mu.Unlock()
	}
	return fp, nil
}

// sameGit compares two states but for when they were read.
func sameGit(a, b *protocol.WorkerGit) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.UpdatedAt, y.UpdatedAt = 0, 0
	return reflect.DeepEqual(x, y)
}

// gitSummary is a worker's git state on one line, for /workers.
func gitSummary(g *protocol.WorkerGit) string {
	if g == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(g.Branch)
	fmt.Fprintf(&b, "  %d file(s) +%d -%d", g.FilesChanged, g.LinesAdded, g.LinesRemoved)
	if g.BaseBranch != "" {
		fmt.Fprintf(&b, ", %d ahead %d behind %s", g.Ahead, g.Behind, g.BaseBranch)
	}
	if g.Uncommitted > 0 {
		fmt.Fprintf(&b, ", %d uncommitted", g.Uncommitted)
	}
	switch {
	case g.Merged:
		b.WriteString(", merged")
		if g.MergedInto != "" {
			b.WriteString(" into " + g.MergedInto)
		}
	case g.Mergeable != nil && *g.Mergeable:
		b.WriteString(", merges cleanly")
	case g.Mergeable != nil:
		fmt.Fprintf(&b, ", conflicts in %s", strings.Join(g.Conflicts, ", "))
	}
	if g.WorktreeMissing {
		b.WriteString(", worktree gone")
	}
	return b.String()
}

// landTarget checks that w exists and may be landed, for /diff and /merge.
func (e *Engine) landTargetLocked(cmd, id string) (*worker, string) {
	if e.lander() == nil {
		return nil, "Workers share the fleet's directory here (not a git repository): there is no branch to " + cmd + "."
	}
	w := e.workerByID[id]
	switch {
	case w == nil:
		return nil, fmt.Sprintf("No worker %q. /workers lists them.", id)
	case w.branch == "":
		return nil, fmt.Sprintf("%s has no branch (its worktree was never made).", id)
	case w.cleaning:
		return nil, fmt.Sprintf("%s's worktree is being removed.", id)
	case w.landing:
		return nil, fmt.Sprintf("%s is being merged.", id)
	}
	return w, ""
}

// settledTargetLocked is landTargetLocked for a worker that must have
// settled (/merge, /pr), with its work described for commit messages.
func (e *Engine) settledTargetLocked(cmd, doing, id string) (*worker, Work, string) {
	w, msg := e.landTargetLocked(cmd, id)
	if w == nil {
		return nil, Work{}, msg
	}
	if w.status == workerRunning || w.status == workerIdle {
		return nil, Work{}, fmt.Sprintf("%s is still working; wait for it to settle (or /cancel it) before %s.", id, doing)
	}
	var work Work
	if t := e.taskByID[w.taskID]; t != nil {
		work = e.workLocked(w, t, nil)
	}
	return w, work, ""
}

// cmdDiff: /diff WORKER [--stat] [PATH...].
func (e *Engine) cmdDiff(args string) (string, error) {
	f := strings.Fields(args)
	var req DiffRequest
	var id string
	for _, a := range f {
		switch {
		case a == "--stat":
			req.Stat = true
		case strings.HasPrefix(a, "-"):
			return "", failure("Usage: /diff WORKER [--stat] [PATH...]")
		case id == "":
			id = a
		default:
			req.Paths = append(req.Paths, a)
		}
	}
	if id == "" {
		return "", failure("Usage: /diff WORKER [--stat] [PATH...]")
	}
	w, msg := e.landTargetLocked("diff", id)
	if w == nil {
		return "", failure(msg)
	}
	l := e.lander()
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		text, truncated, err := l.Diff(ctx, id, req, maxDiffReply)
		cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		switch {
		case err != nil:
			e.replyErrorLocked(fmt.Sprintf("Could not diff %s: %v", id, err))
		case strings.TrimSpace(text) == "":
			e.replyLocked(fmt.Sprintf("%s has no changes against its base.", id))
		default:
			text = strings.TrimRight(text, "\n")
			if truncated {
				text += fmt.Sprintf("\n… (cut at %d KiB: fleet diff %s shows all of it)", maxDiffReply>>10, id)
			}
			e.replyLocked(text)
		}
	}()
	return "", nil
}

// cmdMerge: /merge WORKER [--squash|--rebase] [--into BRANCH].
func (e *Engine) cmdMerge(args string) (string, error) {
	const usage = "Usage: /merge WORKER [--squash|--rebase] [--into BRANCH]"
	f := strings.Fields(args)
	var req MergeRequest
	var id string
	for i := 0; i < len(f); i++ {
		switch a := f[i]; {
		case a == "--squash" || a == "--rebase":
			if req.Mode != "" {
				return "", failure("Choose one of --squash and --rebase. " + usage)
			}
			req.Mode = strings.TrimPrefix(a, "--")
		case a == "--into":
			if i+1 >= len(f) {
				return "", failure(usage)
			}
			i++
			req.Into = f[i]
		case strings.HasPrefix(a, "--into="):
			req.Into = strings.TrimPrefix(a, "--into=")
		case strings.HasPrefix(a, "-") || id != "":
			return "", failure(usage)
		default:
			id = a
		}
	}
	if id == "" {
		return "", failure(usage)
	}
	w, work, msg := e.settledTargetLocked("merge", "merging", id)
	if w == nil {
		return "", failure(msg)
	}
	w.landing = true // no /clean, /tell or second /merge meanwhile
	l := e.lander()
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		text, err := l.Merge(ctx, id, req, work)
		cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		w.landing = false
		w.gitStale = true
		if err != nil {
			e.replyErrorLocked(err.Error())
			return
		}
		e.activityLocked(id, protocol.HubMerged, text)
		e.replyLocked(text)
	}()
	return "", nil
}

// cmdApply: /apply WORKER [PATH...]. Like fleet apply run in the
// repository's main work tree: the worker may still be running (what its
// branch and worktree hold now is applied).
func (e *Engine) cmdApply(args string) (string, error) {
	const usage = "Usage: /apply WORKER [PATH...]"
	f := strings.Fields(args)
	if len(f) == 0 || strings.HasPrefix(f[0], "-") {
		return "", failure(usage)
	}
	id, paths := f[0], f[1:]
	w, msg := e.landTargetLocked("apply", id)
	if w == nil {
		return "", failure(msg)
	}
	w.landing = true // no /clean or /merge while the change is read
	l := e.lander()
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		text, err := l.Apply(ctx, id, paths)
		cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		w.landing = false
		if err != nil {
			e.replyErrorLocked(err.Error())
			return
		}
		e.replyLocked(text)
	}()
	return "", nil
}

// cmdPR: /pr WORKER [--draft]. The push goes through the confirm policy
// like any other: when it matches, an operator confirms it first.
func (e *Engine) cmdPR(args string) (string, error) {
	const usage = "Usage: /pr WORKER [--draft]"
	var id string
	draft := false
	for _, a := range strings.Fields(args) {
		switch {
		case a == "--draft":
			draft = true
		case strings.HasPrefix(a, "-") || id != "":
			return "", failure(usage)
		default:
			id = a
		}
	}
	if id == "" {
		return "", failure(usage)
	}
	w, work, msg := e.settledTargetLocked("open a pull request for", "handing it on", id)
	if w == nil {
		return "", failure(msg)
	}
	l := e.lander()
	push := l.PushCommand(id)
	needsConfirm := e.cfg.Policy != nil && e.cfg.Policy.Match(push) != ""
	w.landing = true
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ok := true
		if needsConfirm {
			// The broker ends the request on an answer, its expiry or shutdown.
			ctx := context.Background()
			ans, err := e.broker.raise(ctx, newHost(e, nil, nil, ctx), request{kind: kindConfirm, topic: "push",
				summary: fmt.Sprintf("Push %s's branch and open a pull request? (%s)", id, push)})
			ok = err == nil && ans.approve
		}
		text := fmt.Sprintf("Did not push %s: the push was not confirmed.", id)
		failed := !ok
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
			var err error
			text, err = l.PR(ctx, id, draft, work)
			cancel()
			if err != nil {
				text, failed = err.Error(), true
			}
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		w.landing = false
		w.gitStale = true
		if failed {
			e.replyErrorLocked(strings.TrimRight(text, "\n"))
			return
		}
		e.replyLocked(strings.TrimRight(text, "\n"))
	}()
	if needsConfirm {
		return fmt.Sprintf("Pushing %s needs a confirm (%s).", id, push), nil
	}
	return "", nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
