package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/journal"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/registry"
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
	home, file, sw, cwd, name := o.Home, o.File, o.Switches, o.Cwd, o.Name
	interactive := o.Terminal != nil
	if o.StatusEvery <= 0 {
		o.StatusEvery = time.Second
	}
	if o.RequestTTL <= 0 {
		o.RequestTTL = 30 * time.Minute
	}
	if o.Prompt != "" {
		// The socket refuses such a prompt; this one comes another way.
		if err := protocol.CheckPromptText(o.Prompt); err != nil {
			return fmt.Errorf("the first prompt: %w", err)
		}
	}
	provs, err := BuildProviders(o.Provider, o.Model, o.File, nil)
	if err != nil {
		return err
	}
	providerName := provs.Default.Name()

	// The session: a fresh one, or a saved one to resume.
	st, err := OpenStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	// A fleet others find in the registry goes by a name no other live
	// fleet there has: claimed before a new session is saved under it.
	if sw.ControlSocket && o.Resume == "" {
		var release func()
		if name, release, err = claimName(home, name, o.NameGiven, cwd, o.Stderr); err != nil {
			return err
		}
		defer release()
	}
	sess, err := openSession(ctx, home, st, o, providerName, name, cwd)
	if err != nil {
		return err
	}
	defer sess.release()
	if sw.ControlSocket && o.Resume != "" {
		var release func()
		if sess.name, release, err = claimName(home, sess.name, false, cwd, o.Stderr); err != nil {
			return err
		}
		defer release()
	}

	// In a terminal the console owns the screen: logs go to a file.
	logOut := o.Stderr
	if interactive {
		f, path, err := openLogFile(home, sess.id)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
		fmt.Fprintf(o.Stderr, "fleet: logging to %s\n", path)
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: o.LogLevel}))

	sigCtx, stopSignals := shutdownOnSignal(ctx, logger)
	defer stopSignals() // only once shutdown is complete
	ctx, stop := context.WithCancel(sigCtx)
	defer stop()

	patterns := provider.DefaultConfirmPatterns
	if file.ConfirmPatterns != nil {
		patterns = *file.ConfirmPatterns
	}
	policy, err := provider.NewPolicy(patterns)
	if err != nil {
		return fmt.Errorf("%s: %w", config.Path(home), err)
	}
	ws, head, notes := openWorkspaces(ctx, home, sess.id, cwd, file.Landing)

	// A native session's work is governed by its root (DESIGN §7).
	var gov engine.Governor
	var ctl *native.Controller
	if sess.mode == modeNative {
		var nst *native.Store
		pv := policyVersion(patterns)
		nst, ctl, err = openNative(ctx, home, sess.id, pv)
		if err != nil {
			return fmt.Errorf("native root: %w", err)
		}
		defer nst.Close()
		gov = &governor{ctl: ctl, baseCommit: head, policyVersion: pv}
		notes = append(notes, fmt.Sprintf("Native-root session: work is governed by root %s (fleet root status).", ctl.BoundRoot()))
	}

	// The control endpoint comes first: the token the server checks is the
	// one in the token file a console will read.
	var ep *endpoint
	token := ""
	if sw.ControlSocket {
		ep, err = openEndpoint(home, logger)
		if err != nil {
			return err
		}
		defer ep.close(logger)
		token = ep.token
	} else if token, err = randomHex(32); err != nil {
		return err
	}

	// Events flow engine → journal (saved first) → server (fanned out). The
	// server exists even without a socket: the terminal console attaches to
	// it in-process, so every surface sees the same stream.
	scfg := serverLimits(file.Limits)
	scfg.Token = token
	scfg.Welcome = protocol.Welcome{SessionID: sess.id, Model: welcomeModel(o, providerName), SessionName: sess.name, Cwd: cwd}
	scfg.Logger = logger.With("component", "controlsock")
	srv := controlsock.New(scfg)
	if sess.history != nil {
		srv.SeedHistory(sess.history, sess.conversationTotal)
	}
	jr := journal.New(st, sess.id, srv, logger.With("component", "journal"),
		journal.WithBatchBytes(srv.SoftQueueBytes()/4))
	// The local provider asks before a command the policy names; in a
	// native session the root approves such tasks before they start.
	shellPolicy := policy
	if gov != nil {
		shellPolicy = nil
	}
	if provs, err = BuildProviders(o.Provider, o.Model, file, shellPolicy); err != nil {
		return err
	}
	// An agent provider's coordinator plans through the fleet's MCP tools.
	var coord *engine.CoordinatorConfig
	var tools *Tools
	if IsAgent(provs.Default.Name()) {
		if _, err := CheckDefault(ctx, provs.Default, os.Environ(), logger); err != nil {
			return err
		}
		if tools, err = ListenTools(logger.With("component", "fleetmcp")); err != nil {
			return err
		}
		defer tools.Close()
		coord = tools.Coordinator()
	}
	// The intel store records what this session's agents do; a store that
	// is unavailable leaves the fleet running without it.
	repo := ""
	if g, ok := ws.(*gitWorkspaces); ok {
		repo = g.m.RepoRoot()
	}
	var drafter provider.Provider
	if IsAgent(provs.Default.Name()) {
		drafter = provs.Default
	}
	var intelSvc engine.Intel
	isvc, note := openIntel(home, intel.Session{
		ID: sess.id, Name: sess.name, Cwd: cwd, Repo: repo, Provider: providerName, Model: o.Model, Mode: sess.mode,
		StartedAt: time.Now().UnixMilli(),
	}, jr, logger.With("component", "intel"), repo, cwd, drafter, file.IntelRetention())
	if isvc != nil {
		intelSvc = isvc
		defer func() { // when Run fails before its shutdown
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			isvc.Close(ctx)
		}()
	} else {
		notes = append(notes, note)
	}
	stall := 10 * time.Minute
	if v := file.Limits.AgentStallTimeoutMs; v != nil {
		stall = time.Duration(*v) * time.Millisecond
	}
	eng := engine.New(engine.Config{
		SessionID:      sess.id,
		SessionName:    sess.name,
		Cwd:            cwd,
		Provider:       provs.Default,
		Providers:      provs.Others,
		Coordinator:    coord,
		StallTimeout:   stall,
		CommitOnSettle: file.Landing.CommitOnSettle,
		Intel:          intelSvc,
		Repo:           repo,
		Publisher:      jr,
		Persister:      jr,
		Throttle:       func(ctx context.Context) { srv.Throttle(ctx); jr.Throttle(ctx) },
		Workspaces:     ws,
		Policy:         policy,
		Restore:        sess.restore,
		Governor:       gov,
		Logger:         logger.With("component", "engine"),
		Workers:        sw.Workers,
		RequestTTL:     o.RequestTTL,
		StatusInterval: o.StatusEvery,
		Budgets:        engineBudgets(file.Budgets),
		Prices:         enginePrices(file.Prices),
	})
	// The server was built first (it is where the engine's events go);
	// the engine it drives exists now.
	srv.Attach(backend{e: eng, native: steeredNative(nativeBackend(ctl), isvc, sess.id)})
	if ctl != nil {
		ctl.OnChange(eng.GovernorChanged)
	}
	if tools != nil {
		if err := tools.Serve(eng); err != nil {
			return err
		}
	}
	for _, n := range append(sess.notes, notes...) {
		eng.Announce(n)
	}

	engineDone := make(chan struct{})
	go func() { defer close(engineDone); eng.Run(ctx) }()
	stopAll := func() {
		stop()
		shutdown(eng, engineDone, isvc, jr, srv, logger)
	}
	serveDone := make(chan error, 1)
	if ep != nil {
		// What was said at start (resume notes, warnings) reaches the
		// replay window before the first console can attach.
		syncCtx, cancelSync := context.WithTimeout(ctx, 5*time.Second)
		jr.Sync(syncCtx)
		cancelSync()
		go func() { serveDone <- srv.Serve(ep.ln) }()
		d := registry.Descriptor{
			SchemaVersion: registry.SchemaVersion, ID: ep.id, PID: os.Getpid(), Name: sess.name, Cwd: cwd,
			SocketPath: ep.socketPath, TokenPath: ep.tokenPath, FleetHome: home,
			StartedAt: time.Now().UnixMilli(), ProtocolVersion: protocol.Version, HubAttach: sw.HubAttach,
		}
		if err := ep.register(d); err != nil {
			stopAll()
			return err
		}
		logger.Info("fleet listening", "id", ep.id, "session", sess.id, "name", sess.name, "socket", ep.socketPath, "tokenFile", ep.tokenPath, "hubAttach", sw.HubAttach)
	}

	if o.Prompt != "" {
		eng.Prompt("cli", o.Prompt)
	}

	var consoleDone <-chan error
	if interactive {
		consoleDone = startTerminal(ctx, srv, token, o.Terminal, o.Stdout)
	} else if !sw.ControlSocket {
		logger.Warn("no control socket and no terminal: nothing can attach to this fleet; use --control-socket")
	}

	var exitErr error
	serveEnded := false
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(sigCtx))
	case err := <-serveDone:
		serveEnded = true
		exitErr = fmt.Errorf("control socket stopped: %w", err)
	case err := <-consoleDone:
		if err != nil {
			exitErr = err
		}
	}
	if interactive {
		// The console has stopped; say what happens next on the terminal.
		fmt.Fprintln(o.Stderr, "fleet: shutting down: stopping running tasks, cancelling pending questions…")
	}
	if ep != nil {
		// Hubs and `fleet ls` stop seeing the fleet before it goes away.
		ep.unregister(logger)
	}
	stopAll()
	if ep != nil && !serveEnded {
		<-serveDone // Shutdown closed the listener
	}
	return exitErr
}

// shutdown stops the engine (tasks killed, pending requests cancelled and
// announced), saves and forwards what the journal holds, and then gives
// clients a moment to receive the last frames.
func shutdown(eng *engine.Engine, engineDone <-chan struct{}, in *intelService, jr *journal.Journal, srv *controlsock.Server, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		logger.Error("engine shutdown", "err", err)
	}
	<-engineDone
	if in != nil {
		ictx, icancel := context.WithTimeout(context.Background(), 3*time.Second)
		in.Close(ictx)
		icancel()
	}
	jr.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	if err := srv.Shutdown(fctx); err != nil {
		logger.Warn("control socket shutdown: clients did not drain in time", "err", err)
	}
}

// backend is what the control server drives: the engine, and the native
// controller in a native session.
type backend struct {
	e      *engine.Engine
	native func(context.Context, *protocol.NativeRequest) protocol.NativeResult
}

func (b backend) Prompt(m *protocol.UserMessage) { b.e.PromptMessage(m) }
func (b backend) AnswerConfirm(id string, approve bool, reason string) error {
	return b.e.AnswerConfirm(id, approve, reason)
}
func (b backend) AnswerAsk(id, text, reason string) error { return b.e.AnswerAsk(id, text, reason) }
func (b backend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	return b.native(ctx, req)
}

// endpoint is the published control socket: token file, listener, and the
// discovery descriptor once registered.
type endpoint struct {
	id, socketPath, tokenPath, registryDir string
	token                                  string
	ln                                     net.Listener
	registered                             bool
}

// openEndpoint prunes stale descriptors, creates the private control
// directory, the token file and the listening socket. The descriptor is
// written later, by register, once the server is serving.
func openEndpoint(home string, logger *slog.Logger) (*endpoint, error) {
	regDir := config.RegistryDir(home)
	if removed, err := registry.PruneStale(regDir); err != nil {
		logger.Warn("pruning stale descriptors", "err", err)
	} else if len(removed) > 0 {
		logger.Info("removed stale fleet descriptors", "ids", removed)
	}
	id, err := registry.NewID(os.Getpid())
	if err != nil {
		return nil, err
	}
	ep := &endpoint{
		id:          id,
		socketPath:  registry.SocketPath(home, id),
		tokenPath:   registry.TokenPath(home, id),
		registryDir: regDir,
	}
	if err := registry.CheckSocketPath(ep.socketPath); err != nil {
		return nil, err
	}
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		return nil, err
	}
	if ep.token, err = registry.WriteToken(ep.tokenPath); err != nil {
		return nil, err
	}
	if ep.ln, err = controlsock.Listen(ep.socketPath); err != nil {
		os.Remove(ep.tokenPath)
		return nil, err
	}
	return ep, nil
}

// claimName claims base as the fleet's name in the registry, or the next
// free numbered name (saying so on stderr). A name given with --name is
// not numbered: it is refused when another fleet has it.
func claimName(home, base string, given bool, cwd string, stderr io.Writer) (string, func(), error) {
	dir := config.RegistryDir(home)
	name, release, err := registry.ClaimName(dir, base)
	if err != nil || name == base {
		return name, release, err
	}
	other := fmt.Sprintf("another fleet named %q is starting", base)
	if entries, err := registry.Live(dir); err == nil {
		for _, e := range entries {
			if e.Name != base {
				continue
			}
			if e.Cwd == cwd {
				other = fmt.Sprintf("another fleet %q runs in this folder", base)
			} else {
				other = fmt.Sprintf("another fleet %q runs, in %q", base, e.Cwd)
			}
			if given {
				other += fmt.Sprintf(", id %s", e.ID)
			}
			break
		}
	}
	if given {
		release()
		return "", nil, fmt.Errorf("--name %q: %s; choose another name", base, other)
	}
	fmt.Fprintf(stderr, "fleet: %s; this one is %q\n", other, name)
	return name, release, nil
}

func (ep *endpoint) register(d registry.Descriptor) error {
	if _, err := registry.Write(ep.registryDir, d); err != nil {
		return fmt.Errorf("register fleet: %w", err)
	}
	ep.registered = true
	return nil
}

func (ep *endpoint) unregister(logger *slog.Logger) {
	if !ep.registered {
		return
	}
	ep.registered = false
	if err := registry.Remove(ep.registryDir, ep.id); err != nil {
		logger.Warn("remove descriptor", "err", err)
	}
}

// close removes everything the endpoint put on disk.
func (ep *endpoint) close(logger *slog.Logger) {
	ep.unregister(logger)
	ep.ln.Close()
	for _, p := range []string{ep.socketPath, ep.tokenPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			logger.Warn("remove", "path", p, "err", err)
		}
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// startTerminal attaches the fleet's own terminal console in-process. Its
// answers resolve requests for socket clients as "superseded".
func startTerminal(ctx context.Context, srv *controlsock.Server, token string, in *os.File, out io.Writer) <-chan error {
	done := make(chan error, 1)
	serverSide, consoleSide := net.Pipe()
	srv.ServeConn(serverSide, controlsock.SurfaceTerminal)
	go func() { done <- runTerminalConsole(ctx, consoleSide, token, in, out, true) }()
	return done
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

// shutdownOnSignal returns a context cancelled by the first SIGINT or
// SIGTERM. Later signals are caught too and only logged: `go run` relays the
// terminal's Ctrl-C to its child a second time, and a second default-action
// signal would kill the fleet half way through removing its socket, token
// and descriptor. Shutdown is bounded (about 13 s) without them.
func shutdownOnSignal(parent context.Context, logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		first := true
		for {
			select {
			case sig := <-sigs:
				if first {
					cancel(fmt.Errorf("%s received", sig))
					first = false
				} else {
					logger.Warn("already shutting down; waiting for tasks to stop", "signal", sig.String())
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}

// intOr is *p, or def when p is nil (0 means "the server's default").
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

// welcomeModel is the model the welcome names: the agent's model when one
// is set, else the provider's name ("local").
func welcomeModel(o Options, providerName string) string {
	for _, m := range []string{o.Model, o.File.Model, o.File.Providers[providerName].Model} {
		if m != "" {
			return m
		}
	}
	return providerName
}
