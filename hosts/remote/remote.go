// Package remote runs the fleet's workers on worker hosts. It tells the
// engine which hosts can take a worker now (engine.Hosts) and gives it, per
// host and provider, a provider.Provider whose sessions are a worker on
// that host: the base goes there as a git bundle, the claim through the
// host's work queue, turns and answers as control requests, and what the
// worker does comes back as numbered event batches through a JetStream
// stream, replayed into the engine as if the worker ran here (hosts/wire,
// docs/hosts.md "Remote workers").
//
// A remote worker keeps a work tree here as every worker does: a mirror of
// its branch, reset to each tip the host sends, so that landing, diffs and
// file-change tracking work on it unchanged.
package remote

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/provider"
)

// Hub is what remote needs of the hosts hub (hosts.Hub has it).
type Hub interface {
	// Hosts is every host the hub serves, with its state now.
	Hosts() []hosts.HostStatus
	// Conn is the fleet's connection into host name's account; nil for a
	// host the hub does not serve.
	Conn(name string) *nats.Conn
}

// Config configures a Fleet. Hub is required.
type Config struct {
	Hub    Hub
	Lease  time.Duration  // the hub's lease, for messages; default hosts.DefaultLease
	Limits gitmove.Limits // bounds of the git transfers
	Logger *slog.Logger   // default: discard
}

// Fleet is the fleet's side of its remote workers.
type Fleet struct {
	cfg Config
	log *slog.Logger

	// ctx ends with Close; wg holds the sessions' loops, which can
	// outlive their sessions (a lost host's late work).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	links  map[string]*link // by host name
	closed bool

	rootsMu sync.Mutex
	roots   map[string]string // a base commit's repository id (gitmove.RepoID)

	slotsMu sync.Mutex
	slots   map[string]*runSlot // by host and run key
}

// runSlot says which session of a run is the current one. A worker lost
// with its host lives on as a late session while /retry starts a new one
// of the same run key: the run's consumer, its events on the host's
// stream and its control subject are the current session's alone. mu
// orders what the two do to them: the new session's claim and the late
// one's stop never cross.
type runSlot struct {
	mu    sync.Mutex
	owner *session
}

// slot is the runSlot of run on host.
func (f *Fleet) slot(host, run string) *runSlot {
	f.slotsMu.Lock()
	defer f.slotsMu.Unlock()
	if f.slots == nil {
		f.slots = map[string]*runSlot{}
	}
	key := host + "/" + run
	sl := f.slots[key]
	if sl == nil {
		sl = &runSlot{}
		f.slots[key] = sl
	}
	return sl
}

// maxRoots bounds Fleet.roots; a full map starts again.
const maxRoots = 256

// repoID is gitmove.RepoID of base in the repository of dir, which never
// changes for a commit: it is asked of git once per base.
func (f *Fleet) repoID(ctx context.Context, dir, base string) (string, error) {
	f.rootsMu.Lock()
	id, ok := f.roots[base]
	f.rootsMu.Unlock()
	if ok {
		return id, nil
	}
	id, err := gitmove.RepoID(ctx, dir, base, f.cfg.Limits)
	if err != nil {
		return "", err
	}
	f.rootsMu.Lock()
	if f.roots == nil || len(f.roots) >= maxRoots {
		f.roots = map[string]string{}
	}
	f.roots[base] = id
	f.rootsMu.Unlock()
	return id, nil
}

// link is the fleet's use of one host's account: its JetStream, with the
// streams and the bucket made.
type link struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	store jetstream.ObjectStore
}

// New returns a Fleet over cfg.Hub.
func New(cfg Config) *Fleet {
	if cfg.Hub == nil {
		panic("remote: Config.Hub is required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = hosts.DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, links: map[string]*link{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// Close stops every session's loop, late ones included (what a lost
// host sends later stays in its stream), and waits for them.
func (f *Fleet) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// goLoop runs loop on a goroutine the Fleet owns; false once closed.
func (f *Fleet) goLoop(loop func(ctx context.Context)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	go func() { defer f.wg.Done(); loop(f.ctx) }()
	return true
}

var _ engine.Hosts = (*Fleet)(nil)

// Candidates are the hosts up now that run prov, pinned to host or label
// when either is set; when none is, why, in words for /tasks.
func (f *Fleet) Candidates(prov, host, label string) ([]engine.HostSlots, string) {
	all := f.cfg.Hub.Hosts()
	var out []engine.HostSlots
	for _, h := range all {
		if (host == "" || h.Name == host) && (label == "" || slices.Contains(h.Labels, label)) &&
			h.State == hosts.StateUp && runs(h, prov) {
			out = append(out, engine.HostSlots{Name: h.Name, Slots: h.Slots})
		}
	}
	if len(out) > 0 {
		return out, ""
	}
	return nil, whyNone(all, prov, host, label)
}

// whyNone says why no host of all can take a worker of prov now.
func whyNone(all []hosts.HostStatus, prov, host, label string) string {
	if host != "" {
		i := slices.IndexFunc(all, func(h hosts.HostStatus) bool { return h.Name == host })
		switch {
		case i < 0:
			return fmt.Sprintf("waiting for host %s, which is not enrolled (fleet hosts add %s)", host, host)
		case all[i].State != hosts.StateUp:
			return fmt.Sprintf("waiting for host %s, which is %s", host, all[i].State)
		case label != "" && !slices.Contains(all[i].Labels, label):
			return fmt.Sprintf("waiting for host %s to have label %s", host, label)
		default:
			return fmt.Sprintf("waiting for host %s, which cannot run %s", host, prov)
		}
	}
	if label != "" {
		return fmt.Sprintf("waiting for a host with label %s that can run %s", label, prov)
	}
	return fmt.Sprintf("waiting for a host that can run %s", prov)
}

// runs reports whether h said it can run prov.
func runs(h hosts.HostStatus, prov string) bool {
	return slices.ContainsFunc(h.Providers, func(p hosts.Provider) bool { return p.Name == prov })
}

// Provider is the provider that runs prov's workers on host.
func (f *Fleet) Provider(host, prov string) provider.Provider {
	return &hostProvider{f: f, host: host, prov: prov}
}

// status is host's state now; ok is false when the hub does not serve it
// (it was removed).
func (f *Fleet) status(host string) (hosts.HostStatus, bool) {
	all := f.cfg.Hub.Hosts()
	i, ok := slices.BinarySearchFunc(all, host, func(h hosts.HostStatus, name string) int { return cmp.Compare(h.Name, name) })
	if !ok {
		return hosts.HostStatus{}, false
	}
	return all[i], true
}

// link returns the fleet's use of host's account, making its streams and
// bucket on first use (and again for a host enrolled anew: a new account).
func (f *Fleet) link(ctx context.Context, host string) (*link, error) {
	nc := f.cfg.Hub.Conn(host)
	if nc == nil {
		return nil, fmt.Errorf("host %s is not enrolled", host)
	}
	f.mu.Lock()
	l := f.links[host]
	f.mu.Unlock()
	if l != nil && l.nc == nc {
		return l, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", host, err)
	}
	// Right after the hub took the host in (a reload of its accounts) the
	// account's JetStream may not answer yet: each try is bounded, and
	// tried again within ctx.
	var store jetstream.ObjectStore
	for {
		tctx, cancel := context.WithTimeout(ctx, linkTry)
		store, err = wire.EnsureHostStreams(tctx, js, host)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		f.log.Info("remote: making a host's streams; trying again", "host", host, "err", err)
	}
	if err != nil {
		return nil, fmt.Errorf("host %s: make its streams: %w", host, err)
	}
	l = &link{nc: nc, js: js, store: store}
	f.mu.Lock()
	f.links[host] = l
	f.mu.Unlock()
	return l, nil
}

// linkTry bounds one try at making a host's streams.
const linkTry = 5 * time.Second

// hostProvider runs workers of provider prov on host.
type hostProvider struct {
	f          *Fleet
	host, prov string
}

// Name is the provider the worker runs (the host is not part of it).
func (p *hostProvider) Name() string { return p.prov }

// Quiet: a shell's turns may rightly print nothing for long, there as here.
func (p *hostProvider) Quiet() bool { return p.prov == "local" }
