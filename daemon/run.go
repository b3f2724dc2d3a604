// Package daemon composes a fleet (Run), in steps that read top to
// bottom: the session (new or resumed, and its lock) and its store, the
// log and signals, where work is kept (worktrees, the native root), the
// providers from config.json and the flags with the fleet's MCP tools, the
// hosts hub when the fleet listens for worker hosts, the control server
// with its endpoint and the journal, the intelligence service, the
// engine; then it serves until the end and shuts down. The
// cli package keeps only commands: it parses flags and calls Run, and its
// other commands open a fleet home's stores (stores.go) and build
// providers (SelectProvider, BuildProviders) the same way.
//
// Events flow engine → journal (saved first) → control server (fanned out);
// requests flow back from the server to the engine through a small
// Backend. The server is built before the engine (it is where the engine's
// events go) and the engine is attached to it once built: no lazy
// pointers.
package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/remote"
	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/journal"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/registry"
	"github.com/agents-fleet/fleet/skill"
	"github.com/agents-fleet/fleet/store"
)

// Options are a fleet's inputs, resolved by the command line.
type Options struct {
	Home     string          // fleetHome
	File     config.File     // its config.json
	Switches config.Switches // flags > environment > config.json
	Cwd      string          // where the fleet runs
	Name     string          // the session's name
	// NameGiven says Name came from --name: a fleet with a control socket
	// refuses a name another live fleet has rather than number it.
	NameGiven bool

	Provider, Model string // --provider, --model ("" keeps config.json's)
	Resume          string // a saved session to resume
	// NativeRoot starts a native-root session; NoNativeRoot insists on a
	// legacy one when resuming.
	NativeRoot, NoNativeRoot bool
	Prompt                   string // a first prompt

	RequestTTL  time.Duration // confirm/ask expiry; default 30 min
	StatusEvery time.Duration // snapshot tick; default 1 s
	LogLevel    slog.Level

	// Terminal, when set, is the terminal the fleet's own console runs on
	// (its logs then go to a file); nil runs headless.
	Terminal       *os.File
	Stdout, Stderr io.Writer
}

// Run runs a fleet session until SIGINT/SIGTERM, ctx's end, the console's
// /quit, or the control socket failing, and shuts it down cleanly: running
// work stopped, pending requests cancelled and announced, socket, token and
// descriptor removed.
func Run(ctx context.Context, o Options) error {
	sel, err := o.resolve()
	if err != nil {
		return err
	}
	f := &fleet{o: o, sel: sel}
	defer f.unwind()
	if err := f.openSession(ctx); err != nil {
		return err
	}
	sigCtx, err := f.openLog(ctx)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(sigCtx)
	f.onClose(stop)
	if err := f.openStores(ctx); err != nil {
		return err
	}
	if err := f.buildProviders(ctx); err != nil {
		return err
	}
	if err := f.openHosts(); err != nil {
		return err
	}
	if err := f.openServer(); err != nil {
		return err
	}
	f.startIntel()
	if err := f.startEngine(); err != nil {
		return err
	}
	return f.serve(ctx, sigCtx, stop)
}

// resolve fills in o's defaults, checks the first prompt and selects the
// default provider and its model.
func (o *Options) resolve() (Selection, error) {
	if o.StatusEvery <= 0 {
		o.StatusEvery = time.Second
	}
	if o.RequestTTL <= 0 {
		o.RequestTTL = 30 * time.Minute
	}
	if o.Prompt != "" {
		// The socket refuses such a prompt; this one comes another way.
		if err := protocol.CheckPromptText(o.Prompt); err != nil {
			return Selection{}, fmt.Errorf("the first prompt: %w", err)
		}
	}
	return SelectProvider(o.Provider, o.Model, o.File)
}

// fleet is a running session's parts, filled in by Run's steps in order.
// Each step registers how to undo what it opened (onClose); Run's unwind
// undoes it all, last opened first, when Run returns.
type fleet struct {
	o    Options
	sel  Selection
	undo []func()

	// openSession, openLog
	st   *store.Store
	sess *session
	log  *slog.Logger
	// openStores
	policy *provider.Policy
	ws     engine.Workspaces
	repo   string // the repository's top level; "" outside git
	ctl    *native.Controller
	gov    engine.Governor // nil in a legacy session
	notes  []string        // told to the operator once the engine runs
	// buildProviders
	provs Providers
	tools *Tools // nil with the local provider
	// openHosts
	hosts  *hosts.Hub    // nil unless the fleet listens for hosts
	remote *remote.Fleet // its workers on hosts; nil without the hub
	// hostsEngine is eng for the hub's goroutine, which reports host
	// changes from before the engine exists.
	hostsEngine atomic.Pointer[engine.Engine]
	// openServer
	ep    *endpoint // nil without --control-socket
	token string
	srv   *controlsock.Server
	jr    *journal.Journal
	// startIntel, startEngine
	intel *intel.Service // nil when the store is unavailable
	eng   *engine.Engine
}

// onClose has undo run when Run returns, before what was opened earlier
// is undone.
func (f *fleet) onClose(undo func()) { f.undo = append(f.undo, undo) }

// unwind undoes what the steps opened, last first.
func (f *fleet) unwind() {
	for i := len(f.undo) - 1; i >= 0; i-- {
		f.undo[i]()
	}
}

// openSession opens the session store and the session, new or resumed. A
// fleet others find in the registry goes by a name no other live fleet
// there has: claimed before a new session is saved under it, and for a
// resumed one under the name it was saved with.
func (f *fleet) openSession(ctx context.Context) error {
	st, err := OpenStore(f.o.Home)
	if err != nil {
		return err
	}
	f.onClose(func() { st.Close() })
	f.st = st
	name, advertised := f.o.Name, f.o.Switches.ControlSocket
	if advertised && f.o.Resume == "" {
		if name, err = f.claimName(name, f.o.NameGiven); err != nil {
			return err
		}
	}
	if f.sess, err = beginSession(ctx, f.o.Home, st, f.o, f.sel, name, f.o.Cwd); err != nil {
		return err
	}
	f.onClose(f.sess.release)
	if advertised && f.o.Resume != "" {
		if f.sess.name, err = f.claimName(f.sess.name, false); err != nil {
			return err
		}
	}
	return nil
}

// claimName claims base (see claimName) until Run returns.
func (f *fleet) claimName(base string, given bool) (string, error) {
	name, release, err := claimName(f.o.Home, base, given, f.o.Cwd, f.o.Stderr)
	if err != nil {
		return "", err
	}
	f.onClose(release)
	return name, nil
}

// openLog starts the fleet's log: on stderr, or in a terminal (the
// console owns the screen) in a file. The context it returns ends on the
// first SIGINT or SIGTERM.
func (f *fleet) openLog(ctx context.Context) (context.Context, error) {
	out := f.o.Stderr
	if f.o.Terminal != nil {
		file, path, err := openLogFile(f.o.Home, f.sess.id)
		if err != nil {
			return nil, err
		}
		f.onClose(func() { file.Close() })
		out = file
		fmt.Fprintf(f.o.Stderr, "fleet: logging to %s\n", path)
	}
	f.log = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: f.o.LogLevel}))
	sigCtx, stopSignals := shutdownOnSignal(ctx, f.log)
	f.onClose(stopSignals) // only once shutdown is complete
	return sigCtx, nil
}

// openStores reads the confirm policy and opens where work is kept:
// worktrees when cwd is in a git repository, and in a native session its
// root (DESIGN §7), which governs the work.
func (f *fleet) openStores(ctx context.Context) error {
	patterns := provider.DefaultConfirmPatterns
	if f.o.File.ConfirmPatterns != nil {
		patterns = *f.o.File.ConfirmPatterns
	}
	policy, err := provider.NewPolicy(patterns)
	if err != nil {
		return fmt.Errorf("%s: %w", config.Path(f.o.Home), err)
	}
	f.policy = policy
	var head string
	f.ws, head, f.notes = openWorkspaces(ctx, f.o.Home, f.sess.id, f.o.Cwd, f.o.File.Landing)
	if g, ok := f.ws.(*gitWorkspaces); ok {
		f.repo = g.m.RepoRoot()
	}
	if f.sess.mode != modeNative {
		return nil
	}
	pv := policyVersion(patterns)
	nst, ctl, err := openNative(ctx, f.o.Home, f.sess.id, pv)
	if err != nil {
		return fmt.Errorf("native root: %w", err)
	}
	f.onClose(func() { nst.Close() })
	f.ctl = ctl
	f.gov = &governor{ctl: ctl, baseCommit: head, policyVersion: pv}
	f.notes = append(f.notes, fmt.Sprintf("Native-root session: work is governed by root %s (fleet root status).", ctl.BoundRoot()))
	return nil
}

// buildProviders builds the providers. An agent provider's CLI is checked
// first, and its coordinator plans through the fleet's MCP tools, which
// start listening here.
func (f *fleet) buildProviders(ctx context.Context) error {
	// The local provider asks before a command the policy names; in a
	// native session the root approves such tasks before they start.
	shellPolicy := f.policy
	if f.gov != nil {
		shellPolicy = nil
	}
	var err error
	if f.provs, err = BuildProviders(f.sel, f.o.File, shellPolicy); err != nil {
		return err
	}
	if !IsAgent(f.provs.Default.Name()) {
		return nil
	}
	if _, err := CheckDefault(ctx, f.provs.Default, os.Environ(), f.log); err != nil {
		return err
	}
	if f.tools, err = ListenTools(f.log.With("component", "fleetmcp")); err != nil {
		return err
	}
	f.onClose(func() { f.tools.Close() })
	return nil
}

// openServer opens the control endpoint, then builds the server and the
// journal. Events flow engine → journal (saved first) → server (fanned
// out). The server exists even without a socket: the terminal console
// attaches to it in-process, so every surface sees the same stream.
func (f *fleet) openServer() error {
	// The endpoint comes first: the token the server checks is the one in
	// the token file a console will read.
	if f.o.Switches.ControlSocket {
		ep, err := openEndpoint(f.o.Home, f.log)
		if err != nil {
			return err
		}
		f.onClose(func() { ep.close(f.log) })
		f.ep, f.token = ep, ep.token
	} else {
		token, err := randomHex(32)
		if err != nil {
			return err
		}
		f.token = token
	}
	cfg := serverLimits(f.o.File.Limits)
	cfg.Token = f.token
	cfg.Welcome = protocol.Welcome{SessionID: f.sess.id, Model: f.sel.ReportedModel(), SessionName: f.sess.name, Cwd: f.o.Cwd}
	cfg.Logger = f.log.With("component", "controlsock")
	f.srv = controlsock.New(cfg)
	if f.sess.history != nil {
		f.srv.SeedHistory(f.sess.history, f.sess.conversationTotal)
	}
	f.jr = journal.New(f.st, f.sess.id, f.srv, f.log.With("component", "journal"),
		journal.WithBatchBytes(f.srv.SoftQueueBytes()/4))
	return nil
}

// startIntel opens the intel store and starts recording what this
// session's agents do. A store that is unavailable (locked, corrupt, newer
// than this binary) leaves the fleet running without it, and a note says
// why.
func (f *fleet) startIntel() {
	st, err := OpenIntel(f.o.Home)
	if err != nil {
		f.notes = append(f.notes, fmt.Sprintf("Intel is unavailable (%v): this fleet records no runs and has no suggestions or skills.", err))
		return
	}
	var drafter provider.Provider
	if IsAgent(f.provs.Default.Name()) {
		drafter = f.provs.Default
	}
	f.intel = intel.StartService(st, intel.ServiceConfig{
		Session: record.Session{ID: f.sess.id, Name: f.sess.name, Cwd: f.o.Cwd, Repo: f.repo, Provider: f.sel.Provider,
			Model: f.sel.ReportedModel(), Mode: f.sess.mode, StartedAt: time.Now().UnixMilli()},
		Publisher: f.jr,
		Logger:    f.log.With("component", "intel"),
		SkillDirs: skill.Dirs(f.repo, f.o.Home),
		Cwd:       f.o.Cwd,
		Drafter:   drafter,
		Retention: f.o.File.IntelRetention(),
	})
	f.onClose(func() { // when Run fails before its shutdown
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		f.intel.Close(ctx)
	})
}

// startEngine builds the engine and attaches it to what drives it: the
// server (built first: it is where the engine's events go), the native
// root and the MCP tools.
func (f *fleet) startEngine() error {
	file := f.o.File
	stall := 10 * time.Minute
	if v := file.Limits.AgentStallTimeoutMs; v != nil {
		stall = time.Duration(*v) * time.Millisecond
	}
	var coord *engine.CoordinatorConfig
	if f.tools != nil {
		coord = f.tools.Coordinator()
	}
	var in engine.Intel
	if f.intel != nil {
		in = f.intel
	}
	f.eng = engine.New(engine.Config{
		SessionID:      f.sess.id,
		SessionName:    f.sess.name,
		Cwd:            f.o.Cwd,
		Provider:       f.provs.Default,
		Providers:      f.provs.Others,
		Model:          f.sel.ReportedModel(),
		Coordinator:    coord,
		StallTimeout:   stall,
		CommitOnSettle: file.Landing.CommitOnSettle,
		Intel:          in,
		Repo:           f.repo,
		Publisher:      f.jr,
		Persister:      f.jr,
		Throttle:       func(ctx context.Context) { f.srv.Throttle(ctx); f.jr.Throttle(ctx) },
		Workspaces:     f.ws,
		Policy:         f.policy,
		Restore:        f.sess.restore,
		Governor:       f.gov,
		Logger:         f.log.With("component", "engine"),
		Workers:        f.o.Switches.Workers,
		RequestTTL:     f.o.RequestTTL,
		StatusInterval: f.o.StatusEvery,
		Budgets:        engineBudgets(file.Budgets),
		Prices:         enginePrices(file.Prices),
		Hosts:          f.engineHosts(),
		Placement:      file.Hosts.Placement,
		Memory:         newMemory(f.sess.id),
		Limits:         engineLimits(file.Limits),
	})
	f.hostsEngine.Store(f.eng)
	f.srv.Attach(backend{e: f.eng, native: steeredNative(nativeBackend(f.ctl), f.intel, f.sess.id)})
	if f.ctl != nil {
		f.ctl.OnChange(f.eng.GovernorChanged)
	}
	if f.tools != nil {
		if err := f.tools.Serve(f.eng); err != nil {
			return err
		}
	}
	for _, n := range append(f.sess.notes, f.notes...) {
		f.eng.Announce(n)
	}
	return nil
}

// openLogFile opens <fleetHome>/logs/<session>.log (0600 in a 0700 dir).
func openLogFile(home, sessionID string) (*os.File, string, error) {
	dir := filepath.Join(home, "logs")
	if err := registry.EnsurePrivateDir(dir); err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, sessionID+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("open log file: %w", err)
	}
	return f, path, nil
}

// serverLimits maps config.json's limits to the control server's
// settings; an absent limit is left zero, which the server takes as its
// default.
func serverLimits(l config.Limits) controlsock.Config {
	ms := func(p *int) time.Duration { return time.Duration(intOr(p, 0)) * time.Millisecond }
	return controlsock.Config{
		MaxClients:      intOr(l.MaxClients, 0),
		MaxInflight:     intOr(l.MaxInflight, 0),
		HelloTimeout:    ms(l.HelloTimeoutMs),
		WriteTimeout:    ms(l.WriteTimeoutMs),
		MaxQueueBytes:   intOr(l.QueueBytes, 0),
		SoftQueueBytes:  intOr(l.SoftQueueBytes, 0),
		SendBufferBytes: sendBufferBytes(l.SendBufferBytes),
		StallGrace:      ms(l.StallGraceMs),
	}
}

// intOr is *p, or def when p is nil.
func intOr(p *int, def int) int {
	if p != nil {
		return *p
	}
	return def
}

// sendBufferBytes maps limits.sendBufferBytes to the server's setting:
// absent is the server's default, 0 the system's.
func sendBufferBytes(v *int) int {
	switch {
	case v == nil:
		return 0
	case *v == 0:
		return -1
	}
	return *v
}
