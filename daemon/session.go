package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/store"
	"github.com/agents-fleet/fleet/worktree"
)

// Session modes (DESIGN §7).
const (
	modeLegacy = "legacy"
	modeNative = "native"
)

// hydrateLimits is the history a resumed session replays to consoles; the
// same window the control server keeps live.
var hydrateLimits = store.Limits{Conversation: 200, TranscriptPerAgent: 200, TranscriptAgents: 64, Hub: 500}

// session is what `fleet run` starts from: a fresh session or a saved one.
type session struct {
	id, name, mode    string
	restore           *engine.Restore
	history           *protocol.Hydrate
	conversationTotal int
	notes             []string // told to the operator once the fleet runs
	release           func()   // drops the session lock
}

// errSessionBusy: another live fleet process serves the session.
var errSessionBusy = errors.New("the session is being served by another fleet process (fleet ls lists them); stop it first")

// beginSession creates a new session, or loads the one named by --resume,
// and holds its lock (release it when the fleet stops). Resuming stops
// what tasks of an earlier, killed fleet process of the session left
// running.
func beginSession(ctx context.Context, home string, st *store.Store, o Options, sel Selection, name, cwd string) (*session, error) {
	mode := modeLegacy
	if o.NativeRoot {
		mode = modeNative
	}
	if o.Resume == "" {
		id, err := randomHex(8)
		if err != nil {
			return nil, err
		}
		now := time.Now().UnixMilli()
		if err := st.CreateSession(ctx, store.Session{
			ID: id, Name: name, Cwd: cwd, Provider: sel.Provider, Model: sel.ReportedModel(), Mode: mode,
			StartedAt: now, LastActive: now,
		}); err != nil {
			return nil, fmt.Errorf("save the new session: %w", err)
		}
		release, err := lockSession(home, id)
		if err != nil {
			return nil, err
		}
		return &session{id: id, name: name, mode: mode, release: release}, nil
	}

	saved, err := st.GetSession(ctx, o.Resume)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("--resume %s: no saved session with that id (fleet sessions lists them)", o.Resume)
		}
		return nil, fmt.Errorf("--resume %s: %w", o.Resume, err)
	}
	switch {
	case o.NativeRoot && saved.Mode != modeNative:
		return nil, fmt.Errorf("--resume %s: the session is %s; it cannot be resumed with --native-root (resume it without the flag)", saved.ID, saved.Mode)
	case o.NoNativeRoot && saved.Mode == modeNative:
		return nil, fmt.Errorf("--resume %s: the session is native; it cannot be resumed with --no-native-root (resume it without the flag)", saved.ID)
	}
	release, err := lockSession(home, saved.ID)
	if err != nil {
		return nil, fmt.Errorf("--resume %s: %w", saved.ID, err)
	}
	loaded, err := st.Load(ctx, saved.ID, hydrateLimits)
	if err != nil {
		release()
		return nil, fmt.Errorf("--resume %s: load the session: %w", saved.ID, err)
	}
	s := &session{id: saved.ID, name: saved.Name, mode: saved.Mode, restore: &loaded.State, conversationTotal: loaded.ConversationTotal, release: release}
	// Nobody else serves the session (we hold its lock), so processes
	// marked with it are leftovers of a killed fleet process; but not
	// those a worker host on this machine runs (HostEnv): the fleet takes
	// those workers up again.
	if pids := proctree.KillMarkedExcept(provider.SessionEnv, saved.ID, provider.HostEnv); len(pids) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("Stopped %d process(es) that tasks of the previous run left running (pid %s).", len(pids), joinInts(pids)))
	}
	s.history = history.Hydrate(&loaded.Window)
	s.notes = append(s.notes, fmt.Sprintf("Resumed session %s (%s), started %s.", saved.ID, saved.Name,
		time.UnixMilli(saved.StartedAt).Format(time.DateTime)))
	if saved.Cwd != cwd {
		s.notes = append(s.notes, fmt.Sprintf("The session ran in %s; it now runs in %s.", saved.Cwd, cwd))
	}
	return s, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// openWorkspaces gives workers git worktrees when cwd is in a repository.
// Outside one (or without git) tasks share cwd, and the notes say so once.
func openWorkspaces(ctx context.Context, home, sessionID, cwd string, land config.Landing) (ws engine.Workspaces, head string, notes []string) {
	root := filepath.Join(home, "worktrees", sessionID)
	m, err := worktree.Open(ctx, cwd, root, sessionID)
	if err != nil {
		if errors.Is(err, worktree.ErrNotRepo) {
			return nil, "", []string{fmt.Sprintf("%s is not in a git repository: tasks run there directly, without worktrees, and file changes are not reported.", cwd)}
		}
		return nil, "", []string{fmt.Sprintf("Worktrees are unavailable (%v): tasks run in %s directly.", err, cwd)}
	}
	if m.Head() == "" {
		return nil, "", []string{fmt.Sprintf("The repository at %s has no commits yet, so workers cannot get worktrees: tasks run in %s directly and file changes are not reported.", m.RepoRoot(), cwd)}
	}
	if m.Dirty() {
		notes = append(notes, fmt.Sprintf("The repository has uncommitted changes; workers' worktrees start from HEAD (%s) without them.", short(m.Head())))
	}
	rel, err := filepath.Rel(m.RepoRoot(), realPath(cwd))
	if err != nil || rel == ".." || filepath.IsAbs(rel) || len(rel) >= 3 && rel[:3] == "../" {
		rel = "."
	}
	return &gitWorkspaces{m: m, rel: rel, session: sessionID, landing: land}, m.Head(), notes
}

// gitWorkspaces adapts worktree.Manager to the engine: a worker runs in the
// directory of its worktree that corresponds to the fleet's cwd, and file
// changes are reported relative to that cwd.
type gitWorkspaces struct {
	m       *worktree.Manager
	rel     string // the fleet's cwd relative to the repository root
	session string
	landing config.Landing // fleet pr's remote and hook, for /pr
}

func (g *gitWorkspaces) Prepare(ctx context.Context, worker string) (engine.Workspace, error) {
	wt, err := g.m.Create(ctx, worker)
	if err != nil {
		return engine.Workspace{}, err
	}
	ws := engine.Workspace{
		Dir: filepath.Join(wt.Path, g.rel), WorktreePath: wt.Path, Branch: wt.Branch,
		BaseCommit: wt.BaseCommit, Warnings: wt.Warnings,
	}
	ws.Track = func(ctx context.Context) (func(context.Context) ([]engine.FileChange, error), error) {
		return g.track(ctx, wt.Path)
	}
	return ws, nil
}

// Track watches an existing worker's worktree again (a follow-up turn).
func (g *gitWorkspaces) Track(ctx context.Context, worker string) (func(context.Context) ([]engine.FileChange, error), error) {
	return g.track(ctx, g.m.Path(worker))
}

// track snapshots the worktree at path and returns what reports the
// changes since, relative to the fleet's cwd.
func (g *gitWorkspaces) track(ctx context.Context, path string) (func(context.Context) ([]engine.FileChange, error), error) {
	before, err := worktree.TakeSnapshot(ctx, path)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]engine.FileChange, error) {
		after, err := worktree.TakeSnapshot(ctx, path)
		if err != nil {
			return nil, err
		}
		changes, err := worktree.Changes(ctx, before, after)
		if err != nil {
			return nil, err
		}
		out := make([]engine.FileChange, 0, len(changes))
		for _, c := range changes {
			p := filepath.FromSlash(c.Path)
			rel, err := filepath.Rel(g.rel, p)
			if err != nil {
				rel = p
			}
			out = append(out, engine.FileChange{Path: filepath.ToSlash(rel), AbsolutePath: filepath.Join(path, p), Type: protocol.ChangeType(c.Type)})
		}
		return out, nil
	}, nil
}

// Dir is where a worker's agent runs in its worktree (the fleet's cwd
// within it).
func (g *gitWorkspaces) Dir(worker string) string { return filepath.Join(g.m.Path(worker), g.rel) }

func (g *gitWorkspaces) Remove(ctx context.Context, worker string, o engine.RemoveOptions) error {
	return g.m.Remove(ctx, worker, worktree.RemoveOptions{Force: o.Force, DeleteBranch: o.DeleteBranch})
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
