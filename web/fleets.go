package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// connState is what a page is told of the server's connection to a fleet.
type connState struct {
	State string `json:"state"` // "attached", "connecting", "stopped"
	ID    string `json:"id"`    // the fleet attached (after a restart: its successor's id)
	Name  string `json:"name,omitempty"`
	Error string `json:"error,omitempty"`
}

// fleets holds one follower per fleet a page asked for, for as long as the
// server runs. Followers are keyed by the id the page asked for; after a
// restart a follower is attached to the successor, under the same key.
type fleets struct {
	regDir string
	log    *slog.Logger
	ctx    context.Context // ends at the server's stop
	wg     sync.WaitGroup

	mu  sync.Mutex
	all map[string]*follower
}

// maxFollowers bounds the fleets one server follows (each is a connection).
const maxFollowers = 64

var errTooManyFleets = fmt.Errorf("this server already follows %d fleets", maxFollowers)

// get returns the follower of fleet id, starting it if needed.
func (fs *fleets) get(id string) (*follower, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.all[id]; ok {
		return f, nil
	}
	if len(fs.all) >= maxFollowers {
		return nil, errTooManyFleets
	}
	entries, err := registry.Live(fs.regDir)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(entries, func(e registry.Entry) bool { return e.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("no live fleet %q", id)
	}
	f := &follower{fs: fs, m: newMirror(), want: entries[i].Descriptor,
		state:  connState{State: "connecting", ID: id, Name: entries[i].Name},
		native: client.NewNativeCalls[chan<- nativeOutcome]("web-")}
	fs.all[id] = f
	fs.wg.Add(1)
	go func() { defer fs.wg.Done(); f.run(fs.ctx) }()
	return f, nil
}

// follower keeps one connection to a fleet, feeding its mirror, and
// attaches the fleet's successor when it restarts (registry.Successor).
type follower struct {
	fs *fleets
	m  *mirror

	mu       sync.Mutex
	want     registry.Descriptor // the fleet followed now
	lastSeen time.Time
	state    connState
	conn     *client.Conn
	// native pairs the pages' nativeRoot attempts with their results,
	// which the fleet sends on this connection only.
	native *client.NativeCalls[chan<- nativeOutcome]
}

// nativeOutcome ends one nativeRoot attempt: its result, or lost when the
// connection it was sent on ended first (a mutation's outcome is then
// uncertain).
type nativeOutcome struct {
	result *protocol.NativeRootResult
	lost   bool
}

// Timings of the follower: how often the registry is looked at while the
// fleet is away, the dial's bound, and the back-off between failed dials.
const (
	rescanEvery  = time.Second
	dialDeadline = 15 * time.Second
	redialMin    = 250 * time.Millisecond
	redialMax    = 10 * time.Second
)

func (f *follower) run(ctx context.Context) {
	backoff := redialMin
	for ctx.Err() == nil {
		d, ok := f.current()
		if !ok {
			if !sleep(ctx, rescanEvery) {
				return
			}
			continue
		}
		attached, err := f.attach(ctx, d)
		if ctx.Err() != nil {
			return
		}
		if attached {
			backoff = redialMin
		}
		f.setState(connState{State: "stopped", ID: d.ID, Name: d.Name, Error: errText(err)})
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, redialMax)
	}
}

// current returns the fleet to attach: the one followed if it is live, or
// its successor; false when neither is. A fleet listed is stamped seen at
// the time the read began: a successor started while the registry was
// read must not look older than the fleet it follows.
func (f *follower) current() (registry.Descriptor, bool) {
	at := time.Now()
	entries, err := registry.Live(f.fs.regDir)
	if err != nil {
		return registry.Descriptor{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.IndexFunc(entries, func(e registry.Entry) bool { return e.ID == f.want.ID }); i >= 0 {
		f.lastSeen = at
		return entries[i].Descriptor, true
	}
	if next, ok := registry.Successor(f.want, f.lastSeen, entries); ok {
		f.want, f.lastSeen = next.Descriptor, at
		return next.Descriptor, true
	}
	return registry.Descriptor{}, false
}

// attach connects to d and mirrors its frames until the connection ends.
// attached says the handshake succeeded.
func (f *follower) attach(ctx context.Context, d registry.Descriptor) (attached bool, err error) {
	if err := registry.Validate(d); err != nil {
		return false, err
	}
	dctx, cancel := context.WithTimeout(ctx, dialDeadline)
	c, err := client.Dial(dctx, d, client.Options{ClientKind: protocol.ClientOther, ClientName: "web"})
	cancel()
	if err != nil {
		return false, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	f.mu.Lock()
	f.conn = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.conn = nil
		lost := f.native.Lost() // a new connection answers nothing sent on this one
		f.mu.Unlock()
		for _, c := range lost {
			c.Data <- nativeOutcome{lost: true}
		}
	}()
	f.m.reset(bytes.Clone(c.WelcomeFrame()))
	f.setState(connState{State: "attached", ID: d.ID, Name: d.Name})
	for {
		msg, raw, _, err := c.Next()
		if err != nil {
			var fe *client.FrameError
			if errors.As(err, &fe) {
				f.fs.log.Debug("web: a frame the fleet sent was skipped", "fleet", d.ID, "err", err)
				continue
			}
			return true, err
		}
		if msg.MessageType() == protocol.TypeReplayEnd {
			f.m.replayEnd()
			continue
		}
		if r, ok := msg.(*protocol.NativeRootResult); ok {
			f.mu.Lock()
			c := f.native.Result(r)
			f.mu.Unlock()
			if c != nil {
				c.Data <- nativeOutcome{result: r}
			}
			continue
		}
		if protocol.ClassOf(msg) == protocol.ClassConnection {
			continue // pong, nativeRootResult, error: this connection's own
		}
		f.m.add(msg, bytes.Clone(raw)) // raw is the reader's buffer, reused by Next
	}
}

func (f *follower) setState(s connState) {
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	f.m.conn(s)
}

func (f *follower) connState() connState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

var errNotAttached = errors.New("the fleet is not attached; try again once it is")

// attachWait bounds how long a send waits for the fleet to be attached (a
// follower just started, or a fleet restarting).
const attachWait = 5 * time.Second

// send sends m to the fleet followed, waiting a little for a connection.
func (f *follower) send(ctx context.Context, m protocol.Message) error {
	deadline := time.Now().Add(attachWait)
	for {
		f.mu.Lock()
		c := f.conn
		f.mu.Unlock()
		if c != nil {
			return c.Send(m)
		}
		if time.Now().After(deadline) || !sleep(ctx, 50*time.Millisecond) {
			return errNotAttached
		}
	}
}

// nativeWait bounds the wait for one nativeRoot attempt's result; past it
// a mutation's outcome is uncertain and the page offers the retry.
const nativeWait = client.DefaultNativeAttemptTimeout

// errNativeUncertain: no result came for a native attempt.
var errNativeUncertain = errors.New("no result came from the fleet (the connection dropped or it did not answer in time)")

// doNative sends req to the fleet's native root and waits for its result. A
// mutation whose attempt ends without one returns errNativeUncertain: the
// page retries it with the same body, which the fleet applies at most once.
func (f *follower) doNative(ctx context.Context, req protocol.NativeRequest) (*protocol.NativeRootResult, error) {
	done := make(chan nativeOutcome, 1)
	call, err := client.NewNativeCall[chan<- nativeOutcome](req, done)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(attachWait)
	for {
		f.mu.Lock()
		c := f.conn
		if c != nil {
			frame, err := f.native.Attempt(call, time.Now())
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if err := c.Send(frame); err != nil {
				f.mu.Lock()
				f.native.Drop(call)
				f.mu.Unlock()
				return nil, fmt.Errorf("%w: %v", errNativeUncertain, err)
			}
			break
		}
		f.mu.Unlock()
		if time.Now().After(deadline) || !sleep(ctx, 50*time.Millisecond) {
			return nil, errNotAttached
		}
	}
	t := time.NewTimer(nativeWait)
	defer t.Stop()
	select {
	case o := <-done:
		if o.lost {
			return nil, errNativeUncertain
		}
		return o.result, nil
	case <-t.C:
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.native.Drop(call)
	f.mu.Unlock()
	return nil, errNativeUncertain
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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
