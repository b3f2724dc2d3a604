// Package jsonrpc is the JSON-RPC 2.0 client the agent adapters speak to
// their CLIs over newline-delimited stdio: Codex's app-server (a dialect
// without the "jsonrpc" member) and Copilot's ACP. It numbers and sends
// the adapter's requests and hands each response to its caller; it
// dispatches the CLI's notifications and requests to the adapter's
// Handler, and runs the prompts those requests raise for the operator.
//
// The client owns no goroutine of its own: Dispatch runs on the adapter's
// reader, responses' callbacks with it, and each prompt on a goroutine the
// client's Prompts owns until its answer is written. Everything it holds
// is bounded: MaxPending calls in flight, agentcli.MaxPrompts prompts
// open, lines by the reader's cap.
package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
)

// MaxPending bounds the adapter's requests awaiting a response.
const MaxPending = 1024

// ErrTooManyCalls is Call's error while MaxPending calls are in flight.
var ErrTooManyCalls = errors.New("too many JSON-RPC calls in flight")

// LineWriter writes one line (with its newline) to the CLI's stdin; an
// *agentcli.Writer is one.
type LineWriter interface {
	WriteLine(ctx context.Context, line []byte) error
}

// Handler is what the adapter does with the CLI's messages. Dispatch calls
// it on the reader's goroutine, one message at a time; the params are
// valid until the call returns.
type Handler interface {
	// Request handles a request of the CLI's. It must answer it, at once
	// (Respond, RespondError) or through Prompt.
	Request(id json.RawMessage, method string, params Params)
	// Notification handles a notification.
	Notification(method string, params Params)
	// Invalid is told of a line that is not a JSON-RPC message.
	Invalid(line []byte)
}

// Options are the dialect and its shortcuts.
type Options struct {
	// Version writes "jsonrpc":"2.0" in each message and requires it in
	// each message read (ACP); Codex's dialect has no such member.
	Version bool
	// Notification reports methods the CLI sends only as notifications:
	// their lines are not searched for an id. Optional.
	Notification func(method string) bool
}

// Client is one adapter's side of the connection. Its methods are safe
// for concurrent use, except Dispatch, which only the reader calls.
type Client struct {
	w       LineWriter
	h       Handler
	opts    Options
	methodP string // the prefix of a line whose method comes first
	idP     string // the prefix of a line whose id comes first

	mu      sync.Mutex
	nextID  int64
	pending map[int64]func(json.RawMessage, error) // nil once closed
	err     error                                  // why the client was closed
	done    chan struct{}                          // closed by Close

	prompts agentcli.Prompts[any]
}

// NewClient writes to w and dispatches to h.
func NewClient(w LineWriter, h Handler, o Options) *Client {
	c := &Client{
		w: w, h: h, opts: o,
		methodP: `{"method":"`, idP: `{"id":`,
		pending: map[int64]func(json.RawMessage, error){},
		done:    make(chan struct{}),
	}
	if o.Version {
		c.methodP, c.idP = `{"jsonrpc":"2.0","method":"`, `{"jsonrpc":"2.0","id":`
	}
	return c
}

func (c *Client) write(ctx context.Context, m outgoing) error {
	if c.opts.Version {
		m.JSONRPC = "2.0"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.Method, err)
	}
	return c.w.WriteLine(ctx, append(b, '\n'))
}

// Call sends a request. onReply, when set, runs with the response on the
// goroutine that dispatches it, in stream order with the notifications
// around it, or with the error Close was given. ctx bounds the write.
func (c *Client) Call(ctx context.Context, method string, params any, onReply func(result json.RawMessage, err error)) error {
	if onReply == nil {
		onReply = func(json.RawMessage, error) {}
	}
	c.mu.Lock()
	switch {
	case c.pending == nil:
		c.mu.Unlock()
		return provider.ErrClosed
	case len(c.pending) >= MaxPending:
		c.mu.Unlock()
		return ErrTooManyCalls
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = onReply
	c.mu.Unlock()
	err := c.write(ctx, outgoing{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: params})
	if err != nil {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return fmt.Errorf("write %s: %w", method, err)
	}
	return nil
}

// Await is Call and a wait for the response, ctx's end, or Close.
// onReply runs as with Call, before Await returns. A write that fails
// (the CLI is gone) waits, bounded, for Close to say why the CLI went.
func (c *Client) Await(ctx context.Context, method string, params any, onReply func(result json.RawMessage, err error)) (json.RawMessage, error) {
	type reply struct {
		result json.RawMessage
		err    error
	}
	ch := make(chan reply, 1)
	err := c.Call(ctx, method, params, func(result json.RawMessage, err error) {
		if onReply != nil {
			onReply(result, err)
		}
		ch <- reply{result, err}
	})
	if err != nil {
		return nil, c.why(ctx, err)
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// why prefers the reason the client was closed with (the CLI's end) over
// err, a write's failure, waiting for it at most agentcli.ExitGrace.
func (c *Client) why(ctx context.Context, err error) error {
	t := time.NewTimer(agentcli.ExitGrace)
	defer t.Stop()
	select {
	case <-c.done:
		if c.err != nil {
			return c.err
		}
	case <-ctx.Done():
	case <-t.C:
	}
	return err
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	return c.write(ctx, outgoing{Method: method, Params: params})
}

// Respond answers the CLI's request id with result ({} when nil).
func (c *Client) Respond(id json.RawMessage, result any) error {
	if result == nil {
		result = map[string]any{}
	}
	return c.write(context.Background(), outgoing{ID: id, Result: result})
}

// RespondError answers the CLI's request id with an error.
func (c *Client) RespondError(id json.RawMessage, code int, msg string) error {
	return c.write(context.Background(), outgoing{ID: id, Error: &Error{Code: code, Message: msg}})
}

// Prompt answers the CLI's request id with what ask returns, asked on a
// goroutine of its own with a context that ends with parent or Withdraw;
// a withdrawn request's answer is dropped. Over agentcli.MaxPrompts the
// request is answered at once with CodeBusy.
func (c *Client) Prompt(id json.RawMessage, parent context.Context, ask func(ctx context.Context) any) {
	id = bytes.Clone(id)
	if !c.prompts.Go(string(id), parent, ask, func(a any) { _ = c.Respond(id, a) }) {
		_ = c.RespondError(id, CodeBusy, "the fleet has too many prompts open")
	}
}

// Withdraw ends the prompt for request id, which the CLI no longer waits
// on.
func (c *Client) Withdraw(id json.RawMessage) { c.prompts.Withdraw(string(id)) }

// WaitPrompts waits for the prompts' goroutines; they end with their
// parent contexts.
func (c *Client) WaitPrompts() { c.prompts.Wait() }

// Close fails each pending call with err, in the order they were made;
// later calls fail with provider.ErrClosed. The callbacks run on the
// caller's goroutine. Only the first Close counts.
func (c *Client) Close(err error) {
	c.mu.Lock()
	pending := c.pending
	if pending == nil {
		c.mu.Unlock()
		return
	}
	c.pending = nil
	c.err = err
	close(c.done)
	c.mu.Unlock()
	ids := make([]int64, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		pending[id](nil, err)
	}
}

// Dispatch handles one line of the CLI's: a response goes to its caller,
// a request or notification to the Handler, anything else to
// Handler.Invalid. The common lines take a fast path: the method is read
// off the line's start and the line is decoded once, by the handler; a
// response nobody waits for any more is dropped undecoded.
func (c *Client) Dispatch(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if method, rest, ok := peekMethod(line, c.methodP); ok {
		p := Params{line: line}
		if c.opts.Notification != nil && c.opts.Notification(method) {
			c.h.Notification(method, p)
			return
		}
		id := peekID(rest)
		if id == nil {
			var head struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &head) != nil {
				c.h.Invalid(line)
				return
			}
			id = head.ID
		}
		if len(id) > 0 && string(id) != "null" {
			c.h.Request(id, method, p)
		} else {
			c.h.Notification(method, p)
		}
		return
	}
	if id, ok := peekResponse(line, c.idP); ok && !c.waiting(id) {
		return
	}
	var m Message
	if line[0] != '{' || json.Unmarshal(line, &m) != nil || c.opts.Version && m.JSONRPC != "2.0" {
		c.h.Invalid(line)
		return
	}
	p := Params{raw: m.Params, split: true}
	switch {
	case m.Method != "" && m.hasID():
		c.h.Request(m.ID, m.Method, p)
	case m.Method != "":
		c.h.Notification(m.Method, p)
	case len(m.ID) > 0:
		c.deliver(&m)
	default:
		c.h.Invalid(line)
	}
}

func (c *Client) waiting(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	return ok
}

// deliver hands a response to the call it answers; one for no call of
// ours waiting (given up on, or never made) is dropped.
func (c *Client) deliver(m *Message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	onReply := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if onReply == nil {
		return
	}
	if m.Error != nil {
		onReply(nil, m.Error)
		return
	}
	onReply(m.Result, nil)
}
