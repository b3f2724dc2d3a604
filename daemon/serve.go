package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// serve runs the engine, publishes the endpoint, gives the engine the
// first prompt and starts the terminal console, then waits for the end:
// ctx's (a signal, the caller), the control socket failing or the
// console's /quit. Then it shuts the fleet down.
func (f *fleet) serve(ctx, sigCtx context.Context, stop context.CancelFunc) error {
	engineDone := make(chan struct{})
	go func() { defer close(engineDone); f.eng.Run(ctx) }()
	stopAll := func() {
		stop()
		f.shutdown(engineDone)
	}
	serveDone, err := f.listen(ctx)
	if err != nil {
		stopAll()
		return err
	}
	if f.o.Prompt != "" {
		f.eng.Prompt("cli", f.o.Prompt)
	}
	var consoleDone <-chan error
	if f.o.Terminal != nil {
		consoleDone = startTerminal(ctx, f.srv, f.token, f.o.Terminal, f.o.Stdout)
	} else if !f.o.Switches.ControlSocket {
		f.log.Warn("no control socket and no terminal: nothing can attach to this fleet; use --control-socket")
	}

	var exitErr error
	serveEnded := false
	select {
	case <-ctx.Done():
		f.log.Info("shutting down", "cause", context.Cause(sigCtx))
	case err := <-serveDone:
		serveEnded = true
		exitErr = fmt.Errorf("control socket stopped: %w", err)
	case err := <-consoleDone:
		if err != nil {
			exitErr = err
		}
	}
	if f.o.Terminal != nil {
		// The console has stopped; say what happens next on the terminal.
		fmt.Fprintln(f.o.Stderr, "fleet: shutting down: stopping running tasks, cancelling pending questions…")
	}
	if f.ep != nil {
		// Hubs and `fleet ls` stop seeing the fleet before it goes away.
		f.ep.unregister(f.log)
	}
	stopAll()
	if f.ep != nil && !serveEnded {
		<-serveDone // Shutdown closed the listener
	}
	return exitErr
}

// listen serves the control socket and publishes the fleet's descriptor.
// Without a socket there is nothing to serve: serveDone is nil.
func (f *fleet) listen(ctx context.Context) (serveDone <-chan error, err error) {
	if f.ep == nil {
		return nil, nil
	}
	// What was said at start (resume notes, warnings) reaches the replay
	// window before the first console can attach.
	syncCtx, cancelSync := context.WithTimeout(ctx, 5*time.Second)
	f.jr.Sync(syncCtx)
	cancelSync()
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(f.ep.ln) }()
	sw, ep := f.o.Switches, f.ep
	d := registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: ep.id, PID: os.Getpid(), Name: f.sess.name, Cwd: f.o.Cwd,
		SocketPath: ep.socketPath, TokenPath: ep.tokenPath, FleetHome: f.o.Home,
		StartedAt: time.Now().UnixMilli(), ProtocolVersion: protocol.Version, HubAttach: sw.HubAttach,
	}
	if err := ep.register(d); err != nil {
		return nil, err
	}
	f.log.Info("fleet listening", "id", ep.id, "session", f.sess.id, "name", f.sess.name, "socket", ep.socketPath, "tokenFile", ep.tokenPath, "hubAttach", sw.HubAttach)
	return done, nil
}

// shutdown stops the engine (tasks killed, pending requests cancelled and
// announced), saves and forwards what the journal holds, and then gives
// clients a moment to receive the last frames.
func (f *fleet) shutdown(engineDone <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.eng.Shutdown(ctx); err != nil {
		f.log.Error("engine shutdown", "err", err)
	}
	<-engineDone
	if f.intel != nil {
		ictx, icancel := context.WithTimeout(context.Background(), 3*time.Second)
		f.intel.Close(ictx)
		icancel()
	}
	f.jr.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	if err := f.srv.Shutdown(fctx); err != nil {
		f.log.Warn("control socket shutdown: clients did not drain in time", "err", err)
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

// startTerminal attaches the fleet's own terminal console in-process. Its
// answers resolve requests for socket clients as "superseded".
func startTerminal(ctx context.Context, srv *controlsock.Server, token string, in *os.File, out io.Writer) <-chan error {
	done := make(chan error, 1)
	serverSide, consoleSide := net.Pipe()
	srv.ServeConn(serverSide, controlsock.SurfaceTerminal)
	go func() { done <- runTerminalConsole(ctx, consoleSide, token, in, out, true) }()
	return done
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
