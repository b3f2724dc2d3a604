package cli

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
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/journal"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/registry"
)

type runOptions struct {
	controlSocket bool
	hub           bool
	nativeRoot    bool
	noNativeRoot  bool
	provider      string
	model         string
	workers       int
	name          string
	resume        string
	headless      bool
	statusEvery   time.Duration
	requestTTL    time.Duration
	logLevel      string
	cpuProfile    string
	memProfile    string
	traceFile     string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [PROMPT]",
		Short: "Start a fleet session in the current directory",
		Long: `Start a fleet session in the current directory with the embedded local
provider: a prompt line "$ <command>" becomes a task that a worker runs with
sh -c. Up to --workers tasks run at once; the rest wait.

With --control-socket (or AGENTS_FLEET_CONTROL_SOCKET=1, or "controlSocket": true
in <fleetHome>/config.json) the session listens on a token-protected Unix
socket and registers itself so that "fleet ls" finds it and "fleet attach",
"fleet events" and "fleet send" can talk to it. --hub also marks the fleet
for the Telegram hub (and implies the socket).

In a terminal, run is an interactive console of its own; with --headless, or
when stdin is not a terminal, it runs without one until SIGINT or SIGTERM.
On shutdown running tasks are stopped, pending questions resolve as
"cancelled", and the socket, token and descriptor are removed.`,
		Example: `  # a fleet that consoles can attach to, running two tasks at first
  fleet run --control-socket --workers 2 '$ go test ./...'

  # in another terminal
  fleet ls
  fleet attach`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := ""
			if len(args) == 1 {
				prompt = args[0]
			}
			return runFleet(cmd, o, prompt)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.controlSocket, "control-socket", false, "listen on a control socket that consoles attach to")
	f.BoolVar(&o.hub, "hub", false, "opt in to the Telegram hub (implies --control-socket)")
	f.BoolVar(&o.nativeRoot, "native-root", false, "start a native-root session (durable operator controls)")
	f.BoolVar(&o.noNativeRoot, "no-native-root", false, "start a legacy session (the default)")
	f.StringVar(&o.provider, "provider", "", "provider: local (shell commands), claude, codex or copilot (agent CLIs); default config.json \"provider\", else local")
	f.StringVar(&o.model, "model", "", "the agent provider's model (default providers.<name>.model, else the CLI's own)")
	f.IntVar(&o.workers, "workers", config.DefaultWorkers, "how many tasks run at once")
	f.StringVar(&o.name, "name", "", "session name (default: the directory's name)")
	f.StringVar(&o.resume, "resume", "", "resume a saved session")
	f.BoolVar(&o.headless, "headless", false, "run without the terminal console (implied when stdin is not a terminal)")
	f.DurationVar(&o.statusEvery, "status-interval", time.Second, "how often status and fleetState are sent when something changed")
	f.DurationVar(&o.requestTTL, "request-ttl", 30*time.Minute, "how long a confirm or ask waits before it expires")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (for performance work)")
	f.MarkHidden("status-interval")
	f.StringVar(&o.traceFile, "trace", "", "write a Go execution trace of the run to this file (for performance work)")
	f.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the run to this file when it ends (for performance work)")
	f.MarkHidden("cpuprofile")
	f.MarkHidden("memprofile")
	f.MarkHidden("trace")
	cmd.MarkFlagsMutuallyExclusive("native-root", "no-native-root")
	return cmd
}

// runFleet is `fleet run`: resolve settings, start the engine and (when
// enabled) the control socket, serve until a signal, shut down cleanly.
func runFleet(cmd *cobra.Command, o runOptions, prompt string) error {
	flags := cmd.Flags()
	if o.statusEvery < 10*time.Millisecond {
		return fmt.Errorf("--status-interval %s: must be at least 10ms", o.statusEvery)
	}
	if o.requestTTL <= 0 {
		return fmt.Errorf("--request-ttl %s: must be positive", o.requestTTL)
	}
	if o.cpuProfile != "" {
		pf, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if o.memProfile != "" {
		mf, err := os.Create(o.memProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		defer mf.Close()
		defer pprof.Lookup("allocs").WriteTo(mf, 0)
	}
	if o.traceFile != "" {
		tf, err := os.Create(o.traceFile)
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer trace.Stop()
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft heap target: the fan-out's garbage is short-lived frames,
		// and without it the heap doubles past the live set during bursts.
		// GOMEMLIMIT overrides it; Go caps GC work if the live set is larger.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		// Collect at 3× the live heap rather than 2× (the memory limit
		// above still caps it): the live set is small and a burst's frames
		// are garbage within milliseconds, so at the default GC took a
		// tenth of the fan-out's CPU (docs/performance.md).
		debug.SetGCPercent(defaultGCPercent)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", o.logLevel)
	}

	home, err := config.Home()
	if err != nil {
		return err
	}
	file, err := config.Load(home)
	if err != nil {
		return err
	}
	var fl config.Flags
	if flags.Changed("control-socket") {
		fl.ControlSocket = &o.controlSocket
	}
	if flags.Changed("hub") {
		fl.Hub = &o.hub
	}
	if flags.Changed("workers") {
		fl.Workers = &o.workers
	}
	if flags.Changed("name") {
		fl.Name = &o.name
	}
	sw, err := config.Resolve(fl, file, nil)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	name := sw.Name
	if name == "" {
		name = filepath.Base(cwd)
	}

	stdinFile, isFile := cmd.InOrStdin().(*os.File)
	interactive := !o.headless && isFile && term.IsTerminal(int(stdinFile.Fd()))

	// The session: a fresh one, or a saved one to resume.
	st, err := openStore(home)
	if err != nil {
		return err
	}
	defer st.Close()
	sess, err := openSession(cmd.Context(), home, st, o, name, cwd)
	if err != nil {
		return err
	}
	defer sess.release()

	// In a terminal the console owns the screen: logs go to a file.
	logOut := cmd.ErrOrStderr()
	if interactive {
		f, path, err := openLogFile(home, sess.id)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
		fmt.Fprintf(cmd.ErrOrStderr(), "fleet: logging to %s\n", path)
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	sigCtx, stopSignals := shutdownOnSignal(cmd.Context(), logger)
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
	ws, head, notes := openWorkspaces(ctx, home, sess.id, cwd)

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
	var eng *engine.Engine
	scfg := serverLimits(file.Limits)
	scfg.Token = token
	scfg.Backend = lazyBackend{e: &eng, native: nativeBackend(ctl)}
	scfg.Welcome = protocol.Welcome{SessionID: sess.id, Model: welcomeModel(o, file), SessionName: sess.name, Cwd: cwd}
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
	provs, err := daemon.BuildProviders(o.provider, o.model, file, shellPolicy)
	if err != nil {
		return err
	}
	// An agent provider's coordinator plans through the fleet's MCP tools.
	var coord *engine.CoordinatorConfig
	var tools *daemon.Tools
	if daemon.IsAgent(provs.Default.Name()) {
		if _, err := daemon.CheckDefault(ctx, provs.Default, os.Environ(), logger); err != nil {
			return err
		}
		if tools, err = daemon.ListenTools(logger.With("component", "fleetmcp")); err != nil {
			return err
		}
		defer tools.Close()
		coord = tools.Coordinator()
	}
	stall := 10 * time.Minute
	if v := file.Limits.AgentStallTimeoutMs; v != nil {
		stall = time.Duration(*v) * time.Millisecond
	}
	eng = engine.New(engine.Config{
		SessionID:      sess.id,
		SessionName:    sess.name,
		Cwd:            cwd,
		Provider:       provs.Default,
		Providers:      provs.Others,
		Coordinator:    coord,
		StallTimeout:   stall,
		Publisher:      jr,
		Persister:      jr,
		Throttle:       func(ctx context.Context) { srv.Throttle(ctx); jr.Throttle(ctx) },
		Workspaces:     ws,
		Policy:         policy,
		Restore:        sess.restore,
		Governor:       gov,
		Logger:         logger.With("component", "engine"),
		Workers:        sw.Workers,
		RequestTTL:     o.requestTTL,
		StatusInterval: o.statusEvery,
	})
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
		shutdown(eng, engineDone, jr, srv, logger)
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

	if prompt != "" {
		eng.Prompt("cli", prompt)
	}

	var consoleDone <-chan error
	if interactive {
		consoleDone = startTerminal(ctx, srv, token, stdinFile, cmd.OutOrStdout())
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
		fmt.Fprintln(cmd.ErrOrStderr(), "fleet: shutting down: stopping running tasks, cancelling pending questions…")
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
func shutdown(eng *engine.Engine, engineDone <-chan struct{}, jr *journal.Journal, srv *controlsock.Server, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		logger.Error("engine shutdown", "err", err)
	}
	<-engineDone
	jr.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	if err := srv.Shutdown(fctx); err != nil {
		logger.Warn("control socket shutdown: clients did not drain in time", "err", err)
	}
}

// lazyBackend lets the server be built before the engine it drives (the
// engine needs the server as its publisher).
type lazyBackend struct {
	e      **engine.Engine
	native func(context.Context, *protocol.NativeRequest) protocol.NativeResult
}

func (b lazyBackend) Prompt(m *protocol.UserMessage) { (*b.e).PromptMessage(m) }
func (b lazyBackend) AnswerConfirm(id string, approve bool, reason string) error {
	return (*b.e).AnswerConfirm(id, approve, reason)
}
func (b lazyBackend) AnswerAsk(id, text, reason string) error {
	return (*b.e).AnswerAsk(id, text, reason)
}
func (b lazyBackend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
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

// defaultMemoryLimit is the soft heap limit of `fleet run` (GOMEMLIMIT
// overrides it).
const defaultMemoryLimit = 48 << 20

// defaultGCPercent is the GOGC of `fleet run` (the GOGC variable overrides
// it).
const defaultGCPercent = 200

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
func welcomeModel(o runOptions, file config.File) string {
	for _, m := range []string{o.model, file.Model} {
		if m != "" {
			return m
		}
	}
	if o.provider != "" {
		return o.provider
	}
	if file.Provider != "" {
		return file.Provider
	}
	return "local"
}
