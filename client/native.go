package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// Native-root controls (docs/native-roots.md). Every console sends them
// through this file, so the rules that make a mutation safe to repeat live
// in one place: its durable operationId is minted once (NativeMutation), it
// carries the revision the operator observed, and an attempt whose result
// is uncertain — the connection dropped before the answer, or none came in
// time — is sent again with the same operationId, revision and body; the
// fleet answers a repeat with the stored receipt and changes nothing. Only
// the transport id, which pairs one attempt with its nativeRootResult, is
// new on every attempt.
//
// NativeCalls is the bookkeeping, without I/O, for a console that owns a
// loop (the Telegram hub, the TUI); NativeClient makes blocking calls on a
// connection of its own, for a command (fleet root).

const (
	// NativeMaxTries bounds the automatic attempts of one mutation
	// (Retryable); an operator may still retry by hand.
	NativeMaxTries = 3
	// DefaultNativeAttemptTimeout is how long a NativeClient waits for one
	// attempt's result before it counts as uncertain.
	DefaultNativeAttemptTimeout = 15 * time.Second
	// MaxNativeCalls bounds the attempts one NativeCalls tracks; the
	// fleet itself answers at most 16 at once per connection.
	MaxNativeCalls = 32
)

// ErrNativeBusy is Attempt's error when MaxNativeCalls attempts await
// their results.
var ErrNativeBusy = errors.New("too many native requests waiting for their results")

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// NewOperationID returns a fresh durable operationId: prefix, "op-" and 16
// hex digits. The prefix names the surface that minted it ("hub-",
// "console-"; "" for fleet root), so a receipt says where it came from.
func NewOperationID(prefix string) string { return prefix + "op-" + randomHex(8) }

// NativeMutation returns req as a mutation to send: with expectedRevision
// set to revision, the root's revision the operator observed, and a fresh
// operationId (NewOperationID(prefix)) unless req already names one, as an
// operator's retry does. To retry, send the returned request again as it
// is, never with a fresh revision or operationId.
func NativeMutation(prefix string, req protocol.NativeRequest, revision int64) protocol.NativeRequest {
	if req.OperationID == "" {
		req.OperationID = NewOperationID(prefix)
	}
	req.ExpectedRevision = &revision
	return req
}

// NativeCall is one native request and its attempts. Its body is fixed
// when the call is made: every attempt sends the same bytes.
type NativeCall[T any] struct {
	// Req is the request; do not modify it.
	Req protocol.NativeRequest
	// Data is the caller's, e.g. what to do with the result.
	Data T
	// Tries counts the attempts sent.
	Tries int
	// Sent is when the latest attempt was sent.
	Sent time.Time
	// Uncertain is set when an attempt of a mutation ended without a
	// result (Lost, Expired): the fleet may or may not have applied it.
	// The next attempt clears it.
	Uncertain bool

	body json.RawMessage
	tid  string // the transport id of the attempt awaiting its result, or ""
	seq  uint64 // orders attempts, oldest first
}

// NewNativeCall makes a call of req, which must pass the action table
// (protocol.NativeRequest.Validate). Build a mutation's req with
// NativeMutation.
func NewNativeCall[T any](req protocol.NativeRequest, data T) (*NativeCall[T], error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return nil, fmt.Errorf("encode the native request: %w", err)
	}
	return &NativeCall[T]{Req: req, Data: data, body: body}, nil
}

// Mutation reports whether c changes a root (it carries an operationId).
func (c *NativeCall[T]) Mutation() bool { return c.Req.OperationID != "" }

// Retryable reports whether c should be sent again on its own: a mutation
// whose result is uncertain, tried fewer than NativeMaxTries times.
func (c *NativeCall[T]) Retryable() bool { return c.Uncertain && c.Tries < NativeMaxTries }

// NativeCalls tracks the attempts awaiting their results on one fleet's
// connection: it gives each attempt its transport id and pairs results
// with calls. It does no I/O and is not safe for concurrent use: the
// console's loop owns it.
type NativeCalls[T any] struct {
	origin string
	byID   map[string]*NativeCall[T]
	seq    uint64
}

// NewNativeCalls returns an empty tracker whose transport ids start with
// origin (e.g. "hub-").
func NewNativeCalls[T any](origin string) *NativeCalls[T] {
	return &NativeCalls[T]{origin: origin, byID: map[string]*NativeCall[T]{}}
}

// Attempt starts an attempt of c, a new call or a retry: the nativeRoot
// frame to send, c's body under a fresh transport id. c is tracked until
// its result comes (Result), the connection is lost (Lost), it expires
// (Expired) or it is dropped (Drop); a frame the caller could not send
// is given back with Unsent. An earlier attempt of c is forgotten: its
// result, if one still comes, is ignored. A frame over
// protocol.MaxNativeFrameSize gives an error that wraps
// protocol.ErrFrameTooLarge.
func (n *NativeCalls[T]) Attempt(c *NativeCall[T], now time.Time) (*protocol.NativeRoot, error) {
	n.Drop(c)
	if len(n.byID) >= MaxNativeCalls {
		return nil, ErrNativeBusy
	}
	frame := &protocol.NativeRoot{ID: n.origin + randomHex(6), Request: c.body}
	enc, err := protocol.Encode(frame)
	if err != nil {
		return nil, fmt.Errorf("encode the native request: %w", err)
	}
	if size := len(enc) - 1; size > protocol.MaxNativeFrameSize {
		return nil, frameSizeError(size)
	}
	n.seq++
	c.tid, c.seq = frame.ID, n.seq
	c.Tries++
	c.Sent = now
	c.Uncertain = false
	n.byID[c.tid] = c
	return frame, nil
}

// frameSizeError is a native request too large to send; it wraps
// protocol.ErrFrameTooLarge.
type frameSizeError int

func (e frameSizeError) Error() string {
	return fmt.Sprintf("the request is %d bytes, over the %d byte limit of native frames", int(e), protocol.MaxNativeFrameSize)
}

func (frameSizeError) Unwrap() error { return protocol.ErrFrameTooLarge }

// Drop stops tracking c's attempt.
func (n *NativeCalls[T]) Drop(c *NativeCall[T]) {
	if c.tid != "" && n.byID[c.tid] == c {
		delete(n.byID, c.tid)
	}
	c.tid = ""
}

// Unsent undoes the attempt Attempt just started, whose frame the caller
// could not send: it is not tracked or counted, and a mutation tried
// before stays Uncertain.
func (n *NativeCalls[T]) Unsent(c *NativeCall[T]) {
	n.Drop(c)
	c.Tries--
	c.Uncertain = c.Mutation() && c.Tries > 0
}

// Result returns the call m answers and stops tracking it; nil when m
// answers none tracked here (another attempt's, one dropped, or a result
// without an id).
func (n *NativeCalls[T]) Result(m *protocol.NativeRootResult) *NativeCall[T] {
	if m.ID == nil {
		return nil
	}
	c := n.byID[*m.ID]
	if c != nil {
		n.Drop(c)
	}
	return c
}

// Lost ends every attempt: the connection they were sent on is gone, so
// no result will come. It returns their calls, oldest first; mutations
// among them are Uncertain.
func (n *NativeCalls[T]) Lost() []*NativeCall[T] {
	return n.end(func(*NativeCall[T]) bool { return true })
}

// Expired ends the attempts sent timeout or longer before now and returns
// their calls, oldest first; mutations among them are Uncertain.
func (n *NativeCalls[T]) Expired(now time.Time, timeout time.Duration) []*NativeCall[T] {
	return n.end(func(c *NativeCall[T]) bool { return now.Sub(c.Sent) >= timeout })
}

func (n *NativeCalls[T]) end(match func(*NativeCall[T]) bool) []*NativeCall[T] {
	var out []*NativeCall[T]
	for _, c := range n.byID {
		if match(c) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *NativeCall[T]) int { return cmp.Compare(a.seq, b.seq) })
	for _, c := range out {
		n.Drop(c)
		c.Uncertain = c.Mutation()
	}
	return out
}

// Len returns how many attempts await their results.
func (n *NativeCalls[T]) Len() int { return len(n.byID) }

// NativeClient makes a command's native calls (fleet root): one at a time,
// each waited for, on a connection of its own. A mutation whose result is
// uncertain is sent again on a fresh connection, with the same
// operationId, revision and body, up to NativeMaxTries attempts in all.
// It is not safe for concurrent use.
type NativeClient struct {
	// AttemptTimeout bounds the wait for one attempt's result;
	// DefaultNativeAttemptTimeout when 0. Set it before the first Do.
	AttemptTimeout time.Duration
	// OnRetry, when set, is told before a mutation is sent again and why.
	OnRetry func(req protocol.NativeRequest, why error)

	dial  func(context.Context) (*Conn, error)
	calls *NativeCalls[struct{}]
	conn  *Conn
}

// NewNativeClient returns a client that connects with dial, e.g. a
// closure over Dial; origin starts its transport ids.
func NewNativeClient(origin string, dial func(context.Context) (*Conn, error)) *NativeClient {
	return &NativeClient{dial: dial, calls: NewNativeCalls[struct{}](origin)}
}

// Connect connects unless connected. Do connects by itself; Connect lets
// a caller tell a fleet it cannot reach from a call that failed.
func (nc *NativeClient) Connect(ctx context.Context) error {
	if nc.conn != nil {
		return nil
	}
	c, err := nc.dial(ctx)
	if err != nil {
		return err
	}
	nc.conn = c
	return nil
}

// Close closes the connection, if any.
func (nc *NativeClient) Close() error {
	if nc.conn == nil {
		return nil
	}
	err := nc.conn.Close()
	nc.conn = nil
	return err
}

// lostError is an attempt that ended without a result because its
// connection did: the outcome is uncertain and the connection is closed.
type lostError struct{ err error }

func (e *lostError) Error() string { return e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// Do sends req (a mutation built with NativeMutation, or a read) and waits
// for its result: the decoded result and the result object as the fleet
// sent it. Frames that are not its result are skipped. A mutation's lost
// attempt is retried (Retryable); a read's is not. Errors after the
// request was sent leave a mutation's outcome unknown: the caller should
// say how to retry it. ctx bounds the whole call; when it ends the error
// wraps ctx.Err().
func (nc *NativeClient) Do(ctx context.Context, req protocol.NativeRequest) (protocol.NativeResult, json.RawMessage, error) {
	c, err := NewNativeCall(req, struct{}{})
	if err != nil {
		return protocol.NativeResult{}, nil, err
	}
	for {
		res, raw, err := nc.attempt(ctx, c)
		if err == nil {
			return res, raw, nil
		}
		var lost *lostError
		if !errors.As(err, &lost) || ctx.Err() != nil || !c.Retryable() {
			if c.Tries > 1 {
				err = fmt.Errorf("%w (sent %d times with operation id %s)", err, c.Tries, c.Req.OperationID)
			}
			return protocol.NativeResult{}, nil, err
		}
		if nc.OnRetry != nil {
			nc.OnRetry(c.Req, err)
		}
	}
}

// attempt sends one attempt of c and reads until its result. Any error
// that ends the connection closes it; a *lostError is one that may be
// retried.
func (nc *NativeClient) attempt(ctx context.Context, c *NativeCall[struct{}]) (protocol.NativeResult, json.RawMessage, error) {
	if err := nc.Connect(ctx); err != nil {
		if c.Tries > 0 {
			return protocol.NativeResult{}, nil, fmt.Errorf("connect again: %w", err)
		}
		return protocol.NativeResult{}, nil, err
	}
	frame, err := nc.calls.Attempt(c, time.Now())
	if err != nil {
		return protocol.NativeResult{}, nil, err
	}
	if err := nc.conn.Send(frame); err != nil {
		// A failed write may still have delivered the frame.
		return protocol.NativeResult{}, nil, nc.lose(ctx, err)
	}
	timeout := nc.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultNativeAttemptTimeout
	}
	conn := nc.conn
	conn.nc.SetReadDeadline(time.Now().Add(timeout))
	// A cancelled ctx interrupts the blocked read.
	stop := context.AfterFunc(ctx, func() { conn.nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		m, raw, _, err := conn.Next()
		var fe *FrameError
		if errors.As(err, &fe) {
			if ours(raw, frame.ID) {
				return protocol.NativeResult{}, nil, nc.fail(c, fmt.Errorf("the fleet sent a malformed result: %v", fe.Err))
			}
			continue
		}
		if err != nil {
			var ne net.Error
			switch {
			case ctx.Err() != nil:
				err = fmt.Errorf("waiting for the result: %w", ctx.Err())
			case errors.As(err, &ne) && ne.Timeout():
				err = fmt.Errorf("no result within %s", timeout)
			case errors.Is(err, io.EOF):
				err = errors.New("the fleet closed the connection before answering")
			default:
				err = fmt.Errorf("connection to the fleet lost while waiting for the result: %w", err)
			}
			return protocol.NativeResult{}, nil, nc.lose(ctx, err)
		}
		switch m := m.(type) {
		case *protocol.NativeRootResult:
			// One request is in flight on this connection, so a result
			// without an id (the fleet could not read ours) is ours too.
			if m.ID != nil && nc.calls.Result(m) != c {
				continue
			}
			var env struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(raw, &env); err != nil {
				return protocol.NativeResult{}, nil, nc.fail(c, fmt.Errorf("the fleet sent a malformed result: %v", err))
			}
			nc.calls.Drop(c)
			if stop() {
				conn.nc.SetReadDeadline(time.Time{})
			} else {
				// ctx ended just now and may still move the deadline:
				// the next call connects afresh.
				nc.Close()
			}
			return m.Result, env.Result, nil
		case *protocol.Error:
			return protocol.NativeResult{}, nil, nc.fail(c, fmt.Errorf("the fleet reported an error: %s", m.Message))
		}
	}
}

// fail ends c's attempt with err, which is not retried, and closes the
// connection, which can no longer be trusted.
func (nc *NativeClient) fail(c *NativeCall[struct{}], err error) error {
	nc.calls.Drop(c)
	nc.Close()
	return err
}

// lose closes the connection an attempt was on and marks the attempt
// uncertain; the error is a *lostError unless ctx ended the attempt.
func (nc *NativeClient) lose(ctx context.Context, err error) error {
	nc.Close()
	nc.calls.Lost()
	if ctx.Err() != nil {
		return err
	}
	return &lostError{err: err}
}

// ours reports whether the malformed frame raw is a nativeRootResult for
// transport id tid or without an id.
func ours(raw []byte, tid string) bool {
	if typ, _ := protocol.PeekType(raw); typ != protocol.TypeNativeRootResult {
		return false
	}
	var env struct {
		ID *string `json:"id"`
	}
	return json.Unmarshal(raw, &env) == nil && (env.ID == nil || *env.ID == tid)
}
