package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// link is the hub's connection to one approved fleet. Its goroutine owns
// the connection: it re-validates the descriptor, reads the token (only
// now, after the operator approved), dials, hands every frame the hub
// relays to the main loop, and re-attaches with back-off when the
// connection drops. Writes go through out, so the main loop never waits on
// a fleet.
type link struct {
	id     string // descriptor id
	gen    int
	cancel context.CancelFunc
	out    chan protocol.Message
	done   chan struct{}
}

// linkEvent reports a link's state to the main loop.
type linkEvent struct {
	id      string
	gen     int
	up      bool
	welcome *protocol.Welcome
	err     error
	// detach is set when the link gave up for good: the descriptor
	// changed, went away or no longer validates.
	detach string
}

// frameEvent is one frame from a fleet.
type frameEvent struct {
	id     string
	gen    int
	m      protocol.Message
	replay bool
}

const (
	linkOutCap     = 256
	backoffMin     = 500 * time.Millisecond
	backoffMax     = 30 * time.Second
	dialTimeout    = 15 * time.Second
	clientName     = "telegram-hub"
	maxDialsLogged = 3
)

// relayed says which frames the main loop needs, by their class
// (protocol.ClassOf); the rest (the dashboards but status, the snapshots,
// the file feed, and the droppable output unless verbose) are dropped in
// the link's goroutine, so a flood costs the main loop nothing.
func relayed(m protocol.Message, verbose bool) bool {
	switch c := protocol.ClassOf(m); {
	case c.Droppable():
		return verbose
	case c == protocol.ClassDashboard:
		_, ok := m.(*protocol.Status) // what /status shows
		return ok
	case c.Saved(), c == protocol.ClassRequest, c == protocol.ClassBackfill, c == protocol.ClassConnection:
		return true
	}
	return false
}

// startLink starts the goroutine for fleet d. emit hands events to the main
// loop and returns false once its context is done.
func startLink(ctx context.Context, d registry.Descriptor, registryDir string, gen int, verbose bool, log *slog.Logger, emit func(context.Context, any) bool) *link {
	ctx, cancel := context.WithCancel(ctx)
	l := &link{id: d.ID, gen: gen, cancel: cancel, out: make(chan protocol.Message, linkOutCap), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		// Events are handed over with the link's own context, so stop
		// never waits on a main loop that is busy stopping it.
		l.run(ctx, d, registryDir, verbose, log, func(e any) bool { return emit(ctx, e) })
	}()
	return l
}

// send queues m for the fleet; false when the queue is full.
func (l *link) send(m protocol.Message) bool {
	select {
	case l.out <- m:
		return true
	default:
		return false
	}
}

func (l *link) stop() {
	l.cancel()
	<-l.done
}

func (l *link) run(ctx context.Context, approved registry.Descriptor, registryDir string, verbose bool, log *slog.Logger, emit func(any) bool) {
	backoff := backoffMin
	failures := 0
	for ctx.Err() == nil {
		// Re-validate on every (re-)attach: the file must still be the
		// one the operator approved, and still pass every check.
		if reason := recheck(registryDir, approved); reason != "" {
			emit(linkEvent{id: l.id, gen: l.gen, detach: reason})
			return
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		conn, err := client.Dial(dctx, approved, client.Options{ClientKind: protocol.ClientBot, ClientName: clientName})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures <= maxDialsLogged {
				log.Warn("fleet attach failed; retrying", "fleet", l.id, "err", err, "in", backoff)
			}
			if !emit(linkEvent{id: l.id, gen: l.gen, err: err}) || !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, backoffMax)
			continue
		}
		failures, backoff = 0, backoffMin
		if !emit(linkEvent{id: l.id, gen: l.gen, up: true, welcome: conn.Welcome()}) {
			conn.Close()
			return
		}
		err = l.serve(ctx, conn, verbose, emit)
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		log.Info("fleet connection lost; re-attaching", "fleet", l.id, "err", err)
		if !emit(linkEvent{id: l.id, gen: l.gen, err: fmt.Errorf("connection lost: %w", err)}) || !sleep(ctx, backoff) {
			return
		}
	}
}

// serve reads frames until the connection ends, and writes what the main
// loop queued.
func (l *link) serve(ctx context.Context, conn *client.Conn, verbose bool, emit func(any) bool) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-wctx.Done():
				werr <- nil
				return
			case m := <-l.out:
				if err := conn.Send(m); err != nil {
					conn.Close() // ends the reader too
					werr <- err
					return
				}
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var err error
	for {
		var m protocol.Message
		var replay bool
		m, _, replay, err = conn.Next()
		var fe *client.FrameError
		if errors.As(err, &fe) {
			continue // a frame we cannot read; the next one may be fine
		}
		if err != nil {
			break
		}
		if !relayed(m, verbose) {
			continue
		}
		if !emit(frameEvent{id: l.id, gen: l.gen, m: m, replay: replay}) {
			break
		}
	}
	cancel()
	if w := <-werr; w != nil {
		return w
	}
	return err
}

// recheck re-reads the fleet's descriptor and returns why the hub must
// detach, or "".
func recheck(dir string, approved registry.Descriptor) string {
	entries, err := registry.List(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.ID != approved.ID {
			continue
		}
		switch {
		case e.Err != nil:
			return "its descriptor no longer reads: " + e.Err.Error()
		case !e.Alive:
			return "the fleet has exited"
		case e.Descriptor != approved:
			return "its descriptor changed after it was approved"
		}
		if err := registry.Validate(e.Descriptor); err != nil {
			return "its descriptor no longer validates: " + err.Error()
		}
		return ""
	}
	return "the fleet has exited"
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
