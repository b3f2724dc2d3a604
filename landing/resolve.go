package landing

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/worktree"
)

// Found is a worker Resolve found, with what git knows of its branch.
type Found struct {
	Worker
	Running string // set while a live fleet worker uses the worktree
	// Chosen says, when several sessions had a worker of that name, which
	// one was taken and how to pick another.
	Chosen string
}

// Resolve finds the worker spec names among the fleet branches of the
// repository containing dir. spec is a worker id ("w3"), "<session>/<worker>"
// with a unique prefix of the session id, or the branch
// "fleet/<session>/<worker>". session, when set, is a session id or a
// unique prefix of one. When several sessions have the worker, the first
// of newest (session ids, most recently active first) that does wins.
func Resolve(ctx context.Context, dir, spec, session string, newest []string) (Found, error) {
	repo, branches, err := worktree.FleetBranches(ctx, dir)
	if err != nil {
		return Found{}, err
	}
	worker := spec
	if rest, ok := strings.CutPrefix(spec, "fleet/"); ok {
		spec = rest
	}
	if s, w, ok := strings.Cut(spec, "/"); ok {
		if session != "" && !strings.HasPrefix(s, session) && !strings.HasPrefix(session, s) {
			return Found{}, fmt.Errorf("%s is not a worker of session %s", spec, session)
		}
		session, worker = s, w
	}
	if err := worktree.ValidWorker(worker); err != nil {
		return Found{}, fmt.Errorf("%q is not a worker name (w1, or SESSION/w1, or fleet/SESSION/w1)", spec)
	}
	var cands []worktree.FleetBranch
	for _, b := range branches {
		if b.Worker == worker && strings.HasPrefix(b.Session, session) {
			cands = append(cands, b)
		}
	}
	switch len(cands) {
	case 0:
		if session != "" {
			return Found{}, fmt.Errorf("no worker %s of session %s in %s (fleet workers lists them)", worker, session, repo)
		}
		return Found{}, fmt.Errorf("no fleet worker %s in %s (fleet workers lists them)", worker, repo)
	case 1:
		return found(repo, cands[0], ""), nil
	}
	for _, id := range newest {
		i := slices.IndexFunc(cands, func(b worktree.FleetBranch) bool { return b.Session == id })
		if i >= 0 {
			note := fmt.Sprintf("%d sessions have a worker %s; using the most recent, %s (--session picks another)", len(cands), worker, id)
			return found(repo, cands[i], note), nil
		}
	}
	names := make([]string, len(cands))
	for i, b := range cands {
		names[i] = b.Branch
	}
	return Found{}, fmt.Errorf("several sessions have a worker %s: %s; name one with --session or as SESSION/%s", worker, strings.Join(names, ", "), worker)
}

func found(repo string, b worktree.FleetBranch, note string) Found {
	return Found{Worker: Of(repo, b), Running: b.Running, Chosen: note}
}
