// Package hostagent is `fleet join`: a worker host's end of a fleet. It
// runs an embedded NATS server with no listener of its own that dials the
// fleet's hub as a leaf node (TLS verified against the fleet's CA alone,
// the host's NKey as its credential), and retries for ever while the link
// is down. It reports itself with a heartbeat every third of the fleet's
// lease: its slots, labels and the providers it can run, found with the
// same adapters and probes the fleet uses (docs/hosts.md).
//
// It runs the fleet's workers (runs.go): it takes claims (wire.Start) from
// its WORK stream while it has a free slot, runs each worker's agent
// session in a worktree of its repository cache (run.go), answers the
// fleet's control and have requests (control.go), commits and sends the
// worker's branch after every turn and at the end, and sends the
// session's events to its EVENTS stream in order, retrying through a link
// that is down (outbox.go).
package hostagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/naming"
	"github.com/agents-fleet/fleet/internal/memtrim"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/registry"
)

// Config configures an agent. Join and WorkDir are required.
type Config struct {
	Join hosts.JoinFile
	// Slots and Labels override the join file's (0 and nil keep them).
	Slots  int
	Labels []string
	// WorkDir is where the host keeps its work (made 0700 if missing):
	// its repository caches in cache/, the workers' worktrees in runs/.
	WorkDir string
	// Providers are what the host can run, by name; those that wrap a CLI
	// (provider.Inspector) are probed once at start, and reported only
	// when found.
	Providers map[string]provider.Provider
	// Env is the host's own environment (nil: os.Environ()): what the
	// probes see, and what the workers' CLIs run with, plus the claim's
	// fleet markers.
	Env     []string
	Version string       // this fleet build, reported to the fleet
	Logger  *slog.Logger // default: discard
}

// reconnectInterval: a refused or failed dial is tried again after about
// this long (plus up to as much again at random). With the pings that
// give a dead link up (hosts.PingInterval), it stays well under the lease,
// so a link that heals is back before the fleet counts the host lost.
const reconnectInterval = time.Second

// firstInterval is the heartbeat interval until the fleet has answered
// (and so told its lease).
const firstInterval = time.Second

// LinkState is the state of an agent's link to the hub.
type LinkState int

const (
	LinkDown      LinkState = iota // not connected (yet, or again)
	LinkConnected                  // a leaf connection to the hub is up
	LinkJoined                     // and the fleet answers the heartbeats
	LinkRefused                    // the hub refused the credential
)

func (s LinkState) String() string {
	return [...]string{"down", "connected", "joined", "refused"}[s]
}

// Agent is a running `fleet join`.
type Agent struct {
	cfg       Config
	log       *slog.Logger
	srv       *server.Server
	nc        *nats.Conn
	instance  string
	providers []hosts.Provider

	refused  atomic.Bool // the hub's last word was an authorization refusal
	state    atomic.Int32
	draining atomic.Bool // as the fleet last said; the heartbeat loop sets it
	// running counts the host's workers now (reported in heartbeats):
	// runs whose session has not ended.
	running atomic.Int32
	// lastEvent is when a run last emitted an event (unix ns, 0 before
	// the first): the host is quiet when it has been a while.
	lastEvent atomic.Int64

	// What runs workers (runs.go).
	caches    *gitmove.Caches
	committer committer
	js        jetstream.JetStream
	storeMu   sync.Mutex
	store     jetstream.ObjectStore // the host's bucket, once bound; storeMu guards it
	// runCtx bounds the runs' own work (setup, commits, sends); abortRuns
	// ends it when Close stops waiting for them.
	runCtx    context.Context
	abortRuns context.CancelFunc
	runsMu    sync.Mutex
	runs      map[string]*run // by run key: live, or ended with events to send
	runWG     sync.WaitGroup  // each run's goroutine
	outWG     sync.WaitGroup  // each run's outbox sender
	wake      chan struct{}   // cap 1: a slot freed, or draining changed
	// stopClaims ends the claim loop, which closes claimsDone.
	stopClaims  context.CancelFunc
	claimsDone  chan struct{}
	claimPasses atomic.Int64 // the claim loop's looks that found no slot (tests)

	cancel context.CancelFunc
	done   chan struct{} // closed when the heartbeat loop ended
	once   sync.Once
}

// Run runs an agent until ctx ends, then stops it.
func Run(ctx context.Context, cfg Config) error {
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	a.Close()
	return nil
}

// Start probes the providers, starts the leaf node and the heartbeats,
// and returns; the link comes up (and back) by itself.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	j := cfg.Join
	if cfg.Slots == 0 {
		cfg.Slots = j.Slots
	}
	if cfg.Labels == nil {
		cfg.Labels = j.Labels
	}
	if err := naming.CheckSlots(cfg.Slots); err != nil {
		return nil, fmt.Errorf("--slots: %w", err)
	}
	if err := naming.CheckLabels(cfg.Labels); err != nil {
		return nil, fmt.Errorf("--labels: %w", err)
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("hostagent: WorkDir is required")
	}
	var err error
	if cfg.WorkDir, err = filepath.Abs(cfg.WorkDir); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if err := registry.EnsurePrivateDir(cfg.WorkDir); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	caches, err := gitmove.OpenCaches(filepath.Join(cfg.WorkDir, "cache"), gitmove.Limits{})
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("host", j.Name), done: make(chan struct{}),
		caches: caches, committer: committer{env: commitEnv(cfg.Env), name: "agents-fleet host " + j.Name, email: "fleet@localhost"},
		runs: map[string]*run{}, wake: make(chan struct{}, 1), claimsDone: make(chan struct{})}
	a.runCtx, a.abortRuns = context.WithCancel(context.Background())
	var b [8]byte
	rand.Read(b[:])
	a.instance = hex.EncodeToString(b[:])
	a.providers = probe(ctx, cfg.Providers, cfg.Env, cfg.Version)
	names := make([]string, len(a.providers))
	for i, p := range a.providers {
		names[i] = p.Name + " " + p.Version
	}
	a.log.Info("providers found", "providers", strings.Join(names, ", "))
	if err := a.startLeaf(); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.startRuns(); err != nil {
		a.Close()
		return nil, err
	}
	var hbCtx context.Context
	hbCtx, a.cancel = context.WithCancel(context.Background())
	go func() { defer close(a.done); a.heartbeats(hbCtx) }()
	return a, nil
}

// startLeaf starts the embedded leaf node and connects to it in-process.
func (a *Agent) startLeaf() error {
	j := a.cfg.Join
	host, _, err := net.SplitHostPort(j.Hub)
	if err != nil {
		return fmt.Errorf("hub address %q: %w", j.Hub, err)
	}
	tlsc, err := hosts.ClientTLS([]byte(j.CA), host)
	if err != nil {
		return err
	}
	u := &url.URL{Scheme: "tls", Host: j.Hub}
	opts := &server.Options{
		ServerName:   "host-" + j.Name,
		DontListen:   true,
		NoSigs:       true,
		PingInterval: hosts.PingInterval,
		MaxPingsOut:  hosts.MaxPingsOut,
		// The host's JetStream requests must reach the hub's JetStream (the
		// host has none of its own). A leaf node of the hub's domain (both
		// have none) keeps $JS.API.> from crossing the link unless this
		// says the account's JetStream is the one of no domain. What a host
		// may do with it the hub decides (hosts.hostPermissions).
		JsAccDefaultDomain: map[string]string{server.DEFAULT_GLOBAL_ACCOUNT: ""},
	}
	opts.LeafNode.ReconnectInterval = reconnectInterval
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{{
		URLs:      []*url.URL{u},
		Nkey:      j.Seed,
		TLS:       true,
		TLSConfig: tlsc,
		// Dial the address in the join file only (the one the hub's
		// certificate covers).
		IgnoreDiscoveredServers: true,
		Compression:             hosts.LeafCompression,
	}}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("leaf node: %w", err)
	}
	srv.SetLoggerV2(jsDomainQuiet{hosts.ServerLogger(a.log.With("component", "nats"), a.onServerError)}, false, false, false)
	srv.Start()
	a.srv = srv
	if !srv.ReadyForConnections(30 * time.Second) {
		return errors.New("leaf node: did not start within 30s")
	}
	a.nc, err = nats.Connect("", nats.InProcessServer(srv), nats.Name("fleet-join:"+j.Name),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("leaf node: connect: %w", err)
	}
	return nil
}

// jsDomainQuiet is a server logger that says at debug level only that
// JsAccDefaultDomain (default_js_domain) is a backwards compatibility
// measure: startLeaf needs it, and a host's operator can do nothing about
// it.
type jsDomainQuiet struct{ server.Logger }

func (l jsDomainQuiet) Warnf(format string, v ...any) {
	if strings.Contains(format, "default_js_domain") {
		l.Debugf(format, v...)
		return
	}
	l.Logger.Warnf(format, v...)
}

// onServerError notes the hub's refusal of the credential (the leaf node
// logs it as an error from the other side).
func (a *Agent) onServerError(msg string) {
	if strings.Contains(msg, "Authorization Violation") {
		a.refused.Store(true)
	}
}

// Link is the state of the link to the hub.
func (a *Agent) Link() LinkState { return LinkState(a.state.Load()) }

// heartbeats looks at the link every second and sends a heartbeat every
// interval (a third of the fleet's lease), and at once when the link comes
// (back) up, until ctx ends; it logs the link's changes of state.
func (a *Agent) heartbeats(ctx context.Context) {
	interval := firstInterval
	var sent time.Time // the last heartbeat the fleet answered
	var trim idleTrim
	tick := time.NewTicker(linkLook)
	defer tick.Stop()
	for {
		state := LinkDown
		if a.srv.NumLeafNodes() > 0 {
			state = LinkConnected
			a.refused.Store(false)
			if LinkState(a.state.Load()) == LinkJoined && time.Since(sent) < interval {
				state = LinkJoined // not time yet
			} else if ack, err := a.heartbeat(ctx, min(interval, 5*time.Second)); err == nil {
				state, sent = LinkJoined, time.Now()
				if lease := time.Duration(ack.LeaseMs) * time.Millisecond; lease > 0 {
					interval = max(lease/3, 100*time.Millisecond)
				}
				a.noteDraining(ack.Draining)
			} else if ctx.Err() == nil {
				a.log.Debug("heartbeat not answered", "err", err)
			}
		} else if a.refused.Load() {
			state = LinkRefused
		}
		if state == LinkJoined && a.Link() != LinkJoined {
			trim.again() // joining was the last of start-up's work
		}
		a.noteState(state, interval)
		trim.look(a.quiet(time.Now()), time.Now())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// quiet reports whether no run has emitted an event for trimIdle: no turn
// is producing output (a worker waiting for the operator is quiet).
func (a *Agent) quiet(now time.Time) bool {
	return now.Sub(time.Unix(0, a.lastEvent.Load())) >= trimIdle
}

// A host mostly waits. When it has joined, and once it has been quiet for
// trimIdle, what start-up or a flood of output took from the OS goes back
// (memtrim.Release), and again every trimEvery while it stays quiet, as
// timers and the garbage collector touch pages again.
const (
	trimIdle  = 10 * time.Second
	trimEvery = 30 * time.Second
)

// idleTrim decides when an idle host gives its memory back.
type idleTrim struct {
	trimmed time.Time // the last Release in this quiet spell; zero while busy
	release func()    // memtrim.Release when nil
}

// again makes the next quiet look release memory.
func (t *idleTrim) again() { t.trimmed = time.Time{} }

// look releases memory on the first look of a quiet spell and every
// trimEvery while it lasts.
func (t *idleTrim) look(quiet bool, now time.Time) {
	if !quiet {
		t.trimmed = time.Time{}
		return
	}
	if t.trimmed.IsZero() || now.Sub(t.trimmed) >= trimEvery {
		if t.release == nil {
			t.release = memtrim.Release
		}
		t.release()
		t.trimmed = now
	}
}

// linkLook is how often the agent looks at its link.
const linkLook = time.Second

// noteState records the link's state and logs a change.
func (a *Agent) noteState(state LinkState, interval time.Duration) {
	old := LinkState(a.state.Swap(int32(state)))
	if old == state {
		return
	}
	switch state {
	case LinkJoined:
		a.log.Info("joined the fleet", "hub", a.cfg.Join.Hub, "heartbeat", interval)
	case LinkConnected:
		if old != LinkJoined {
			a.log.Info("connected to the fleet's hub; waiting for it to answer", "hub", a.cfg.Join.Hub)
		}
	case LinkRefused:
		a.log.Error("the fleet refused this host's credential: it was removed (fleet hosts remove " + a.cfg.Join.Name +
			"), or the join file is from another fleet; trying again")
	case LinkDown:
		if old != LinkRefused {
			a.log.Warn("no link to the fleet's hub; trying again", "hub", a.cfg.Join.Hub)
		}
	}
}

// noteDraining records whether the fleet drains this host and logs a
// change; only the heartbeat loop calls it.
func (a *Agent) noteDraining(draining bool) {
	if a.draining.Swap(draining) == draining {
		return
	}
	if draining {
		a.log.Info("the fleet drains this host: it takes no new workers")
	} else {
		a.log.Info("the fleet no longer drains this host")
		a.wakeClaims()
	}
}

// heartbeat sends one heartbeat and waits up to timeout for the answer.
func (a *Agent) heartbeat(ctx context.Context, timeout time.Duration) (hosts.Ack, error) {
	hb := hosts.Heartbeat{Slots: a.cfg.Slots, Labels: a.cfg.Labels, Providers: a.providers,
		Running: int(a.running.Load()), Instance: a.instance, Version: a.cfg.Version}
	if hb.Labels == nil {
		hb.Labels = []string{}
	}
	data, err := json.Marshal(hb)
	if err != nil {
		return hosts.Ack{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := a.nc.RequestWithContext(ctx, hosts.HeartbeatSubject(a.cfg.Join.Name), data)
	if err != nil {
		return hosts.Ack{}, err
	}
	var ack hosts.Ack
	if err := json.Unmarshal(m.Data, &ack); err != nil {
		return hosts.Ack{}, fmt.Errorf("heartbeat answer: %w", err)
	}
	return ack, nil
}

// Close stops taking claims, ends the workers (their sessions closed,
// their last work and events sent while the link is up; stopRuns bounds
// each step), then stops the heartbeats, the link and the leaf node. It is
// safe to call more than once.
func (a *Agent) Close() {
	a.once.Do(func() {
		a.stopRuns()
		if a.abortRuns != nil {
			a.abortRuns()
		}
		if a.cancel != nil {
			a.cancel()
			<-a.done
		}
		if a.nc != nil {
			a.nc.Close()
		}
		if a.srv != nil {
			a.srv.Shutdown()
			a.srv.WaitForShutdown()
		}
	})
}
