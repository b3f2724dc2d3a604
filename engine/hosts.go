package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/hosts/naming"
	"github.com/agents-fleet/fleet/provider"
)

// Worker hosts (docs/hosts.md): other machines that run workers. The
// engine decides where each worker runs (placement) and counts its own
// workers on each host against the host's slots; Hosts says which hosts
// are up and gives the provider that runs a worker on one.

// Hosts is the fleet's worker hosts as the engine sees them (the daemon
// implements it over the hub). Candidates is called with the engine's lock
// held, so it must not block or call back into the engine; Provider is
// called without it.
type Hosts interface {
	// Candidates are the hosts up now that can run provider prov, pinned to
	// host or label when either is set, each with its slots; when none is,
	// why ("no host with label gpu is up").
	Candidates(prov, host, label string) ([]HostSlots, string)
	// Provider is the provider that runs prov's workers on host.
	Provider(host, prov string) provider.Provider
}

// ErrNotStarted is wrapped by a host provider's Start error when the
// worker never started on the host (the host was lost before it took the
// claim, and the claim was taken back): the task goes back to the queue
// instead of failing.
var ErrNotStarted = errors.New("the worker never started on its host")

// HostSlots is a host that can take workers, and how many at once.
type HostSlots struct {
	Name  string
	Slots int
}

// Placement policies (Config.Placement): where an unpinned worker starts.
const (
	// PlacementLocalFirst: a free local slot first, else a host's.
	PlacementLocalFirst = "local-first"
	// PlacementSpread: whichever of this machine and the hosts is least
	// loaded (running workers over slots).
	PlacementSpread = "spread"
	// PlacementHostsOnly: hosts only; the local slots run nothing new.
	PlacementHostsOnly = "hosts-only"
)

// HostsChanged tells the engine a host came up, went down or changed its
// slots: pending tasks that were waiting for one are dispatched again. The
// daemon calls it on host up/down; it takes the engine's lock, so it must
// not be called while holding a lock that Hosts.Candidates takes.
func (e *Engine) HostsChanged() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dispatchLocked()
}

// load is what runs where now, for one dispatch pass: the live local
// workers and, per host, the live workers the engine placed there.
type load struct {
	local  int
	onHost map[string]int
	// cands memoizes Candidates within the pass (hosts do not change
	// during it), by provider, host and label.
	cands map[[3]string]candidates
}

type candidates struct {
	hosts []HostSlots
	why   string
}

func (e *Engine) loadLocked() *load {
	l := &load{onHost: map[string]int{}, cands: map[[3]string]candidates{}}
	for _, w := range e.workers {
		if w.status != workerRunning && w.status != workerIdle {
			continue
		}
		if w.hostName == "" {
			l.local++
		} else {
			l.onHost[w.hostName]++
		}
	}
	return l
}

// placeLocked says where t starts now: on this machine (host ""), or on a
// host; ok is false when nowhere has room, and why then says why when it
// is not simply the local cap (a pinned task, or hosts-only placement).
func (e *Engine) placeLocked(t *task, l *load) (host string, ok bool, why string) {
	pinned := t.pinHost != "" || t.pinLabel != ""
	if e.cfg.Hosts == nil { // every worker here (checkPinLocked refuses pins)
		return "", l.local < e.cfg.Workers, ""
	}
	localOK := !pinned && e.cfg.Placement != PlacementHostsOnly && l.local < e.cfg.Workers
	if localOK && e.cfg.Placement == PlacementLocalFirst {
		return "", true, ""
	}
	key := [3]string{e.providerNameLocked(t.provider), t.pinHost, t.pinLabel}
	c, seen := l.cands[key]
	if !seen {
		c.hosts, c.why = e.cfg.Hosts.Candidates(key[0], key[1], key[2])
		l.cands[key] = c
	}
	best, bestLoad := "", 0.0
	for _, h := range c.hosts {
		n := l.onHost[h.Name]
		if h.Slots <= 0 || n >= h.Slots {
			continue
		}
		if r := float64(n) / float64(h.Slots); best == "" || r < bestLoad {
			best, bestLoad = h.Name, r
		}
	}
	switch {
	case localOK && (best == "" || float64(l.local)/float64(e.cfg.Workers) <= bestLoad):
		return "", true, "" // spread: a tie stays here, where no work has to move
	case best != "":
		return best, true, ""
	case !pinned && e.cfg.Placement != PlacementHostsOnly:
		return "", false, "" // it waits for a local slot, as under the cap
	case len(c.hosts) == 0 && c.why != "":
		return "", false, c.why
	case len(c.hosts) == 0:
		return "", false, "waiting for a worker host"
	}
	const named = 3 // a reason stays one short line however many hosts match
	names := make([]string, 0, named+1)
	for _, h := range c.hosts[:min(len(c.hosts), named)] {
		names = append(names, h.Name)
	}
	if len(c.hosts) > named {
		names = append(names, fmt.Sprintf("%d more", len(c.hosts)-named))
	}
	return "", false, "waiting for a free slot on " + strings.Join(names, ", ")
}

// took counts a worker started on host.
func (l *load) took(host string) {
	if host == "" {
		l.local++
	} else {
		l.onHost[host]++
	}
}

// setWaitLocked sets why t waits ("" none).
func (e *Engine) setWaitLocked(t *task, why string) {
	if t.waitReason != why {
		t.waitReason = why
		e.changedLocked()
	}
}

// checkPinLocked checks a pin to a host or a label (/spawn --host|--label,
// spawn_worker's host and label).
func (e *Engine) checkPinLocked(host, label string) error {
	switch {
	case host == "" && label == "":
		return nil
	case host != "" && label != "":
		return errors.New("pin a worker to a host or to a label, not both")
	case e.cfg.Hosts == nil:
		return errors.New("this fleet has no worker hosts (fleet run --hosts-listen)")
	case e.cfg.Governor != nil:
		return errors.New("workers run on hosts in legacy sessions only; this session has a native root")
	case host != "":
		return naming.CheckName(host)
	}
	return naming.CheckLabels([]string{label})
}

// checkPlacement panics on a Config.Placement that is none of the
// policies: the daemon checks the configuration first.
func checkPlacement(p string) {
	switch p {
	case PlacementLocalFirst, PlacementSpread, PlacementHostsOnly:
	default:
		panic(fmt.Sprintf("engine: Config.Placement %q is not %s, %s or %s", p, PlacementLocalFirst, PlacementSpread, PlacementHostsOnly))
	}
}
