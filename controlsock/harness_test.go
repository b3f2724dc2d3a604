package controlsock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/protocol"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeBackend records what the server routes to the fleet.
type fakeBackend struct {
	mu       sync.Mutex
	prompts  []string
	confirms map[string]bool
	asks     map[string]string
	srv      *Server // to resolve requests like the engine would
	choices  map[string][]string
}

// Prompt records m before it echoes it: a test that saw the echo then
// finds the prompt recorded.
func (b *fakeBackend) Prompt(m *protocol.UserMessage) {
	b.mu.Lock()
	b.prompts = append(b.prompts, m.Source+": "+m.Text)
	b.mu.Unlock()
	b.srv.Broadcast(m)
}

func (b *fakeBackend) AnswerConfirm(id string, approve bool, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.confirms[id]; !ok {
		return errors.New("no pending request with id " + id)
	}
	delete(b.confirms, id)
	b.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: approve, Kind: protocol.KindConfirm, Reason: protocol.ResolvedReason(reason)})
	return nil
}

func (b *fakeBackend) AnswerAsk(id, text, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.choices[id]
	if !ok {
		// Like the engine: the refusal is the error frame to send.
		return &protocol.Error{Message: "no pending request with id " + id, Code: protocol.ErrCodeRequestUnknown, ID: id}
	}
	if len(ch) > 0 {
		found := false
		for _, c := range ch {
			found = found || c == text
		}
		if !found {
			return errors.New("answer must be one of the choices")
		}
	}
	delete(b.choices, id)
	b.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: true, Kind: protocol.KindAsk, Reason: protocol.ResolvedReason(reason)})
	return nil
}

func (b *fakeBackend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	return protocol.NativeResult{Kind: "error", Code: "native_mode_required", Message: "legacy session"}
}

// harness is a server on a real control socket: a Unix socket in a short
// temp dir, or a named pipe on Windows.
type harness struct {
	t    *testing.T
	srv  *Server
	be   *fakeBackend
	path string
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	path := testdir.SocketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	be := &fakeBackend{confirms: map[string]bool{}, asks: map[string]string{}, choices: map[string][]string{}}
	cfg := Config{
		Token:   testToken,
		Backend: be,
		Welcome: protocol.Welcome{SessionID: "s1", Model: "local", SessionName: "test", Cwd: "/tmp"},
		// A test client is one goroutine decoding frames under the race
		// detector on a loaded machine: the default 10 s for a chunk of a
		// megabyte frame is not a bound it must meet. Tests of eviction
		// set their own.
		WriteTimeout: time.Minute,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv := New(cfg)
	be.srv = srv
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return &harness{t: t, srv: srv, be: be, path: path}
}

// tconn is a raw test client.
type tconn struct {
	t    *testing.T
	conn net.Conn
	r    *protocol.Reader
}

func (h *harness) dial() *tconn {
	h.t.Helper()
	c, err := Dial(h.t.Context(), h.path)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return &tconn{t: h.t, conn: c, r: protocol.NewReader(c, protocol.MaxFrameSize)}
}

// attach dials, says hello and reads through replayEnd, returning the
// types seen in order.
func (h *harness) attach(name string) (*tconn, []string) {
	h.t.Helper()
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"other","clientName":"` + name + `"}`)
	var types []string
	for {
		m := c.next()
		types = append(types, m.MessageType())
		if m.MessageType() == protocol.TypeReplayEnd {
			return c, types
		}
	}
}

func (c *tconn) sendRaw(s string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write([]byte(s + "\n")); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next reads one frame (5 s limit) and decodes it.
func (c *tconn) next() protocol.Message {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.r.ReadFrame()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	m, err := protocol.Decode(f)
	if err != nil {
		c.t.Fatalf("decode %q: %v", f, err)
	}
	return m
}

// nextOf skips frames until one of type typ arrives.
func (c *tconn) nextOf(typ string) protocol.Message {
	c.t.Helper()
	for {
		if m := c.next(); m.MessageType() == typ {
			return m
		}
	}
}

// expectError reads the next frame and checks it is an error.
func (c *tconn) expectError() string {
	c.t.Helper()
	m := c.next()
	e, ok := m.(*protocol.Error)
	if !ok {
		c.t.Fatalf("want error frame, got %T %+v", m, m)
	}
	return e.Message
}

// expectClosed checks that the server closes the connection.
func (c *tconn) expectClosed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("connection still open")
			}
			return
		}
		c.t.Logf("frame before close: %s", f)
	}
}

// alive checks the connection still works: ping gets pong as the next frame.
func (c *tconn) alive() {
	c.t.Helper()
	c.sendRaw(`{"type":"ping"}`)
	if m := c.next(); m.MessageType() != protocol.TypePong {
		c.t.Fatalf("want pong, got %s", mustJSON(m))
	}
}

func mustJSON(m protocol.Message) string {
	b, _ := json.Marshal(m)
	return m.MessageType() + " " + string(b)
}

func netPipe() (net.Conn, net.Conn) { return net.Pipe() }

// dialAndAttach is attach for use off the test goroutine: it returns errors.
func dialAndAttach(path, name string) (*tconn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(`{"type":"hello","token":"` + testToken + `","clientKind":"other","clientName":"` + name + `"}` + "\n")); err != nil {
		c.Close()
		return nil, err
	}
	r := protocol.NewReader(c, protocol.MaxFrameSize)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if typ, _ := protocol.PeekType(f); typ == protocol.TypeReplayEnd {
			c.SetDeadline(time.Time{})
			return &tconn{conn: c, r: r}, nil
		}
	}
}

// expectClosedAfterReading drains whatever the server had queued for a
// stalled client and checks that the connection then ends.
func (c *tconn) expectClosedAfterReading() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := c.r.ReadFrame(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatal("connection still open")
			}
			return
		}
	}
}
