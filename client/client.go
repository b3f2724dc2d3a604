// Package client is the Go SDK for a fleet's control socket: find a fleet in
// the registry, dial it, do the hello handshake, then read typed frames and
// send prompts and answers, and fold the frames into what a console keeps of
// the fleet (State). Every console (fleet attach, fleet events, fleet send,
// the TUI, the Telegram hub) speaks to a fleet through it.
//
// A Conn has one reader (the goroutine calling Next) and any number of
// writers (Send and its helpers are safe for concurrent use).
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// Default timeouts.
const (
	// DefaultHelloTimeout bounds the wait for welcome after hello.
	DefaultHelloTimeout = 10 * time.Second
	// WriteTimeout bounds one Send: a fleet that does not read for this long
	// is treated as gone.
	WriteTimeout = 10 * time.Second
)

// Find resolves a fleet: it lists the live descriptors in the registry dir
// (config.Home, config.RegistryDir), selects one by selector (an id, a
// unique id prefix or a name; empty means the only live fleet, see
// registry.Select) and validates it (registry.Validate). Errors from Select
// wrap registry.ErrNoFleet or registry.ErrAmbiguous.
func Find(selector string) (registry.Entry, error) {
	home, err := config.Home()
	if err != nil {
		return registry.Entry{}, err
	}
	dir := config.RegistryDir(home)
	entries, err := registry.Live(dir)
	if err != nil {
		return registry.Entry{}, err
	}
	e, err := registry.Select(entries, selector)
	if err != nil {
		if errors.Is(err, registry.ErrNoFleet) && len(entries) == 0 {
			return registry.Entry{}, fmt.Errorf("%w (no live descriptor in %s; start one with fleet run --control-socket)", err, dir)
		}
		return registry.Entry{}, err
	}
	if err := registry.Validate(e.Descriptor); err != nil {
		return e, fmt.Errorf("fleet %s (%s): %w", e.ID, e.Path, err)
	}
	return e, nil
}

// Options describe the client in hello.
type Options struct {
	// ClientKind is repl, bot or other; empty means other.
	ClientKind protocol.ClientKind
	// ClientName is shown to other clients as the source of this client's
	// prompts; optional.
	ClientName string
	// HelloTimeout bounds the wait for welcome; default DefaultHelloTimeout.
	HelloTimeout time.Duration
}

// ServerError is an error frame the fleet sent in answer to the handshake.
type ServerError struct {
	Message string
}

func (e *ServerError) Error() string { return "fleet refused the connection: " + e.Message }

// Dial connects to the fleet of descriptor d: it reads the token from
// d.TokenPath (registry.ReadToken), connects to d.SocketPath, sends hello and
// waits for welcome. An error frame in place of welcome is returned as a
// *ServerError. ctx bounds the dial and the handshake only.
func Dial(ctx context.Context, d registry.Descriptor, opts Options) (*Conn, error) {
	token, err := registry.ReadToken(d.TokenPath)
	if err != nil {
		return nil, fmt.Errorf("fleet %s: %w", fleetLabel(d), err)
	}
	return dial(ctx, d.SocketPath, token, opts, fleetLabel(d))
}

// DialSocket is Dial with an explicit socket path and token.
func DialSocket(ctx context.Context, socketPath, token string, opts Options) (*Conn, error) {
	return dial(ctx, socketPath, token, opts, "")
}

func fleetLabel(d registry.Descriptor) string {
	if d.Name != "" {
		return fmt.Sprintf("%s (%s)", d.ID, d.Name)
	}
	return d.ID
}

func dial(ctx context.Context, path, token string, opts Options, label string) (*Conn, error) {
	nc, err := controlsock.Dial(ctx, path)
	if err != nil {
		return nil, dialError(label, path, err)
	}
	c, err := Handshake(ctx, nc, token, opts)
	if err != nil && label != "" {
		return nil, fmt.Errorf("fleet %s: %w", label, err)
	}
	return c, err
}

// Handshake turns an established connection into a Conn: it sends hello and
// waits for welcome, like Dial. It is for transports Dial does not know,
// e.g. an in-process net.Pipe served by controlsock.Server.ServeConn. The
// Conn owns nc from then on; on error nc is closed.
func Handshake(ctx context.Context, nc net.Conn, token string, opts Options) (*Conn, error) {
	if opts.ClientKind == "" {
		opts.ClientKind = protocol.ClientKind("other")
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	c := &Conn{nc: nc, r: protocol.NewReader(nc, protocol.MaxFrameSize)}
	if err := c.handshake(ctx, token, opts); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// dialError explains the common failures: the fleet exited (no socket) or
// its socket is left over (refused).
func dialError(label, path string, err error) error {
	who := "fleet"
	if label != "" {
		who = "fleet " + label
	}
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: control socket %s does not exist; has the fleet exited? (%w)", who, path, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: nothing is listening on control socket %s; the fleet may have exited (%w)", who, path, err)
	}
	return fmt.Errorf("%s: connect to control socket %s: %w", who, path, err)
}

// handshake sends hello and reads welcome, within opts.HelloTimeout and ctx.
func (c *Conn) handshake(ctx context.Context, token string, opts Options) error {
	deadline := time.Now().Add(opts.HelloTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.nc.SetDeadline(deadline)
	// A cancelled ctx interrupts the blocked read or write.
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	hello, err := protocol.Encode(&protocol.Hello{
		Token:           token,
		ClientKind:      opts.ClientKind,
		ClientName:      opts.ClientName,
		ProtocolVersion: protocol.Int(protocol.Version),
	})
	if err != nil {
		return fmt.Errorf("encode hello: %w", err)
	}
	if _, err := c.nc.Write(hello); err != nil {
		return c.handshakeErr(ctx, "send hello", opts, err)
	}
	frame, err := c.r.ReadFrame()
	if err != nil {
		return c.handshakeErr(ctx, "read welcome", opts, err)
	}
	m, err := protocol.Decode(frame)
	if err != nil {
		return fmt.Errorf("read welcome: %w", err)
	}
	switch m := m.(type) {
	case *protocol.Welcome:
		c.welcome = m
		c.welcomeRaw = bytes.Clone(frame)
	case *protocol.Error:
		return &ServerError{Message: m.Message}
	default:
		return fmt.Errorf("handshake: expected welcome, got %q", m.MessageType())
	}
	c.replay = slices.Contains(c.welcome.Capabilities, protocol.CapReplayEnd)
	if !stop() {
		// ctx was cancelled just now; its deadline may have been set.
		return ctx.Err()
	}
	c.nc.SetDeadline(time.Time{})
	return nil
}

func (c *Conn) handshakeErr(ctx context.Context, what string, opts Options, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: no answer within %s", what, opts.HelloTimeout)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: the fleet closed the connection", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Conn is an authenticated connection to a fleet.
type Conn struct {
	nc      net.Conn
	r       *protocol.Reader
	welcome *protocol.Welcome
	// welcomeRaw is the welcome frame as received, without its newline.
	welcomeRaw []byte

	// replay is true until replayEnd was returned; only Next touches it.
	replay bool
	// skipped is how many malformed entries Next left out of the frame it
	// returned last; only Next touches it.
	skipped int

	wmu sync.Mutex // serialises writes

	closeOnce sync.Once
	closeErr  error
}

// Welcome returns the welcome frame the fleet sent.
func (c *Conn) Welcome() *protocol.Welcome { return c.welcome }

// WelcomeFrame returns the welcome frame exactly as received, without its
// newline. The caller must not modify it.
func (c *Conn) WelcomeFrame() []byte { return c.welcomeRaw }

// FrameError is returned by Next for a frame that is not valid JSON or whose
// fields do not match its known type. The connection stays usable: call
// Next again.
type FrameError struct {
	Err error
}

func (e *FrameError) Error() string { return "malformed frame from the fleet: " + e.Err.Error() }
func (e *FrameError) Unwrap() error { return e.Err }

// Next returns the next frame: the decoded message, the raw frame (without
// its newline; valid until the next call) and whether it is replay, i.e.
// received before replayEnd. The replayEnd frame itself comes with
// replay=true; a fleet that does not advertise replayEnd sends no replay.
// Unknown types come back as *protocol.Unknown.
//
// Frames are read liberally (protocol.DecodeLenient): an entry of an array
// that does not match the protocol (a hydrate line without its agent, say)
// is left out and the rest of the frame is returned; Skipped says how many
// were. raw is the frame as received, entries and all.
//
// A malformed frame gives a *FrameError together with raw; any other error
// ends the stream: io.EOF when the fleet closed the connection between
// frames, net.ErrClosed after Close.
func (c *Conn) Next() (m protocol.Message, raw []byte, replay bool, err error) {
	c.skipped = 0
	frame, err := c.r.ReadFrame()
	if err != nil {
		if errors.Is(err, protocol.ErrFrameTooLarge) {
			return nil, nil, false, fmt.Errorf("the fleet sent a frame over %d bytes: %w", protocol.MaxFrameSize, err)
		}
		return nil, nil, false, err
	}
	replay = c.replay
	m, c.skipped, err = protocol.DecodeLenient(frame)
	if err != nil {
		return nil, frame, replay, &FrameError{Err: err}
	}
	if _, ok := m.(*protocol.ReplayEnd); ok {
		c.replay = false
	}
	return m, frame, replay, nil
}

// Skipped returns how many malformed entries (of hydrate's history, of
// any array) were left out of the frame the last Next returned, 0 when it
// was read whole. A console says so: "N history entries skipped". Call it
// from the goroutine that calls Next.
func (c *Conn) Skipped() int { return c.skipped }

// Send encodes m and writes it. It is safe for concurrent use.
func (c *Conn) Send(m protocol.Message) error {
	frame, err := protocol.Encode(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.MessageType(), err)
	}
	if len(frame)-1 > protocol.MaxFrameSize {
		return fmt.Errorf("%s frame is %d bytes, over the %d byte limit", m.MessageType(), len(frame)-1, protocol.MaxFrameSize)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if _, err := c.nc.Write(frame); err != nil {
		return fmt.Errorf("send %s: %w", m.MessageType(), err)
	}
	return nil
}

// NewRequestID returns a fresh random prompt requestId. Callers that must
// know the id before the echo can arrive generate it first and Send the
// Prompt themselves.
func NewRequestID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "req-" + hex.EncodeToString(b[:])
}

// Prompt sends text as a prompt with a fresh requestId and returns the id;
// the fleet echoes it on the resulting userMessage.
func (c *Conn) Prompt(text string) (requestID string, err error) {
	id := NewRequestID()
	return id, c.Send(&protocol.Prompt{Text: text, RequestID: id})
}

// Confirm answers the pending confirmRequest id.
func (c *Conn) Confirm(id string, approve bool) error {
	return c.Send(&protocol.ConfirmResponse{ID: id, Approve: approve})
}

// Answer answers the pending askRequest id: a choice's value, or free text.
func (c *Conn) Answer(id, text string) error {
	return c.Send(&protocol.AskResponse{ID: id, Text: text})
}

// Close closes the connection; a blocked Next returns. It is idempotent.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.nc.Close() })
	return c.closeErr
}
