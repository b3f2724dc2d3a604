package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// On Windows go-winio completes every pipe's I/O in one goroutine, started
// with the first pipe and never stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Microsoft/go-winio.ioCompletionProcessor"))
}

// fakeBackend records what the server routes to the fleet.
type fakeBackend struct {
	mu      sync.Mutex
	prompts []string
	srv     *controlsock.Server // publishes the echo, as the engine does
}

func (b *fakeBackend) Prompt(m *protocol.UserMessage) {
	b.srv.Broadcast(m)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prompts = append(b.prompts, m.Source+": "+m.Text)
}

func (b *fakeBackend) AnswerConfirm(id string, approve bool, reason string) error {
	return errors.New("no pending request " + id)
}

func (b *fakeBackend) AnswerAsk(id, text, reason string) error {
	return errors.New("no pending request " + id)
}

func (b *fakeBackend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	return protocol.NativeResult{Kind: "error", Code: "unsupported", Message: "not in tests"}
}

func (b *fakeBackend) Prompts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.prompts...)
}

type harness struct {
	srv     *controlsock.Server
	backend *fakeBackend
	path    string
	token   string
	home    string
	serve   chan error
}

// startServer starts a control server on a real control socket: a Unix
// socket in a short temp dir, or a named pipe on Windows.
func startServer(t *testing.T) *harness {
	t.Helper()
	h := &harness{backend: &fakeBackend{}, home: testdir.New(t), token: strings.Repeat("ab", 32), serve: make(chan error, 1)}
	h.path = testdir.SocketPath(t)
	h.srv = controlsock.New(controlsock.Config{
		Token:   h.token,
		Backend: h.backend,
		Welcome: protocol.Welcome{SessionID: "sess-1", Model: "local", Cwd: "/tmp"},
	})
	h.backend.srv = h.srv
	ln, err := controlsock.Listen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { h.serve <- h.srv.Serve(ln) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
	<-h.serve
	h.serve <- nil // stop is idempotent
}

func (h *harness) dial(t *testing.T, opts Options) *Conn {
	t.Helper()
	c, err := DialSocket(t.Context(), h.path, h.token, opts)
	if err != nil {
		t.Fatalf("DialSocket: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type frame struct {
	m      protocol.Message
	replay bool
}

// next reads one frame, failing the test on error.
func next(t *testing.T, c *Conn) frame {
	t.Helper()
	m, raw, replay, err := c.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if len(raw) == 0 {
		t.Fatalf("Next returned %T without raw bytes", m)
	}
	return frame{m, replay}
}

// untilLive reads up to and including replayEnd and returns what came.
func untilLive(t *testing.T, c *Conn) []frame {
	t.Helper()
	var out []frame
	for {
		f := next(t, c)
		out = append(out, f)
		if _, ok := f.m.(*protocol.ReplayEnd); ok {
			return out
		}
	}
}

func TestHelloWelcome(t *testing.T) {
	h := startServer(t)
	c := h.dial(t, Options{ClientKind: "repl", ClientName: "test"})
	w := c.Welcome()
	if w == nil || w.SessionID != "sess-1" || w.Model != "local" {
		t.Fatalf("welcome = %+v", w)
	}
	if w.ProtocolVersion == nil || *w.ProtocolVersion != protocol.Version {
		t.Errorf("welcome protocolVersion = %v", w.ProtocolVersion)
	}
	raw := c.WelcomeFrame()
	if m, err := protocol.Decode(raw); err != nil || m.MessageType() != protocol.TypeWelcome || bytes.HasSuffix(raw, []byte("\n")) {
		t.Errorf("WelcomeFrame = %q (%v)", raw, err)
	}
}

func TestHandshakeOverPipe(t *testing.T) {
	h := startServer(t)
	serverSide, clientSide := net.Pipe()
	h.srv.ServeConn(serverSide, controlsock.SurfaceTerminal)
	c, err := Handshake(t.Context(), clientSide, h.token, Options{ClientKind: "repl", ClientName: "terminal"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	untilLive(t, c)
	if _, err := c.Prompt("over a pipe"); err != nil {
		t.Fatal(err)
	}
	if um, ok := next(t, c).m.(*protocol.UserMessage); !ok || um.Source != "terminal" {
		t.Fatalf("echo = %#v", um)
	}
}

func TestReplayFlag(t *testing.T) {
	h := startServer(t)
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "confirm-1", Summary: "Deploy?", Ts: 1})
	c := h.dial(t, Options{})
	frames := untilLive(t, c)
	var sawConfirm bool
	for _, f := range frames {
		if !f.replay {
			t.Errorf("%s before replayEnd has replay=false", f.m.MessageType())
		}
		if cr, ok := f.m.(*protocol.ConfirmRequest); ok && cr.ID == "confirm-1" {
			sawConfirm = true
		}
	}
	if !sawConfirm {
		t.Errorf("pending confirmRequest not replayed: %v", frames)
	}
	h.srv.Broadcast(&protocol.Reply{Text: "live"})
	f := next(t, c)
	if r, ok := f.m.(*protocol.Reply); !ok || r.Text != "live" || f.replay {
		t.Errorf("live frame = %#v replay=%v", f.m, f.replay)
	}
}

func TestPromptEcho(t *testing.T) {
	h := startServer(t)
	c := h.dial(t, Options{ClientKind: "other", ClientName: "tester"})
	untilLive(t, c)
	id, err := c.Prompt("make test")
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		t.Fatal("empty requestId")
	}
	f := next(t, c)
	um, ok := f.m.(*protocol.UserMessage)
	if !ok {
		t.Fatalf("got %#v, want userMessage", f.m)
	}
	if um.RequestID != id || um.Text != "make test" || um.Source != "tester" || f.replay {
		t.Errorf("echo = %+v (replay %v), want requestId %s", um, f.replay, id)
	}
	// The server echoes before it hands the prompt to the backend; a ping
	// sent now is answered after that hand-off (one reader per connection).
	if err := c.Send(&protocol.Ping{}); err != nil {
		t.Fatal(err)
	}
	if f := next(t, c); f.m.MessageType() != protocol.TypePong {
		t.Fatalf("got %s, want pong", f.m.MessageType())
	}
	if got := h.backend.Prompts(); len(got) != 1 || got[0] != "tester: make test" {
		t.Errorf("backend prompts = %q", got)
	}
}

func TestServerErrorIsNotFatal(t *testing.T) {
	h := startServer(t)
	c := h.dial(t, Options{})
	untilLive(t, c)
	if err := c.Confirm("confirm-x", true); err != nil {
		t.Fatal(err)
	}
	f := next(t, c)
	e, ok := f.m.(*protocol.Error)
	if !ok || !strings.Contains(e.Message, "confirm-x") {
		t.Fatalf("got %#v, want error naming the id", f.m)
	}
	if err := c.Send(&protocol.Ping{}); err != nil {
		t.Fatal(err)
	}
	if f := next(t, c); f.m.MessageType() != protocol.TypePong {
		t.Fatalf("got %s, want pong", f.m.MessageType())
	}
}

func TestWrongToken(t *testing.T) {
	h := startServer(t)
	_, err := DialSocket(t.Context(), h.path, "nope", Options{})
	var se *ServerError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "token") {
		t.Fatalf("err = %v, want a *ServerError about the token", err)
	}
}

func TestServerClosing(t *testing.T) {
	h := startServer(t)
	c := h.dial(t, Options{})
	untilLive(t, c)
	h.stop()
	for {
		_, _, _, err := c.Next()
		if err == nil {
			continue
		}
		var fe *FrameError
		if errors.As(err, &fe) {
			t.Fatalf("unexpected frame error: %v", err)
		}
		if !errors.Is(err, io.EOF) {
			t.Logf("Next after shutdown: %v", err)
		}
		break
	}
}

func TestCloseUnblocksNext(t *testing.T) {
	h := startServer(t)
	c := h.dial(t, Options{})
	untilLive(t, c)
	done := make(chan error, 1)
	go func() {
		_, _, _, err := c.Next()
		done <- err
	}()
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Next after Close = %v, want net.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestDialMissingSocket(t *testing.T) {
	path := testdir.SocketPath(t) // nothing listens there
	_, err := Dial(t.Context(), registry.Descriptor{ID: "1-abc", SocketPath: path, TokenPath: writeToken(t, testdir.New(t))}, Options{})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "1-abc") {
		t.Fatalf("err = %v, want one naming the fleet and %s", err, path)
	}
}

func TestDialCancelledContext(t *testing.T) {
	// A listener that accepts but never answers: the handshake must give up
	// when ctx ends.
	path := testdir.SocketPath(t)
	ln, err := controlsock.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = DialSocket(ctx, path, "t", Options{})
	if !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "no answer")) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if c, ok := <-accepted; ok {
		c.Close()
	}
}

func writeToken(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "tok")
	if _, err := registry.WriteToken(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindAndDial(t *testing.T) {
	home := testdir.New(t)
	regDir := filepath.Join(home, "sockets")
	t.Setenv("AGENTS_FLEET_HOME", home)
	t.Setenv("AGENTS_FLEET_REGISTRY_DIR", regDir)

	if _, err := Find(""); !errors.Is(err, registry.ErrNoFleet) {
		t.Fatalf("Find with no fleet = %v, want ErrNoFleet", err)
	}

	id, err := registry.NewID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	token, err := registry.WriteToken(registry.TokenPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	srv := controlsock.New(controlsock.Config{Token: token, Backend: &fakeBackend{}})
	ln, err := controlsock.Listen(registry.SocketPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		<-served
	})
	d := registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: "alpha", Cwd: home,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion,
	}
	if _, err := registry.Write(regDir, d); err != nil {
		t.Fatal(err)
	}

	for _, sel := range []string{"", "alpha", id, id[:len(id)-3]} {
		e, err := Find(sel)
		if err != nil {
			t.Fatalf("Find(%q): %v", sel, err)
		}
		if e.ID != id {
			t.Fatalf("Find(%q) = %s, want %s", sel, e.ID, id)
		}
	}
	if _, err := Find("beta"); !errors.Is(err, registry.ErrNoFleet) {
		t.Fatalf("Find(beta) = %v, want ErrNoFleet", err)
	}

	e, _ := Find("alpha")
	c, err := Dial(t.Context(), e.Descriptor, Options{ClientKind: "repl", ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Welcome() == nil {
		t.Fatal("no welcome")
	}
}

// TestHydrateWithABadEntryKeepsTheRest: a fleet of an earlier build sends
// coordinator lines in hydrate without the agent the protocol requires
// there; the client leaves those out, counts them, and returns the rest of
// the history instead of a FrameError for all of it.
func TestHydrateWithABadEntryKeepsTheRest(t *testing.T) {
	serverSide, clientSide := net.Pipe()
	defer serverSide.Close()
	fleet := make(chan error, 1)
	go func() {
		r := protocol.NewReader(serverSide, protocol.MaxFrameSize)
		if _, err := r.ReadFrame(); err != nil { // hello
			fleet <- err
			return
		}
		_, err := io.WriteString(serverSide, `{"type":"welcome","protocolVersion":1,"capabilities":["replayEnd"]}`+"\n"+
			`{"type":"hydrate","conversation":[{"role":"user","text":"$ make","ts":1}],"transcripts":[`+
			`{"role":"assistant","text":"I'll split this in two.","ts":2},{"agent":"w1","role":"tool","text":"ok","ts":3}],`+
			`"hub":[{"type":"hubEvent","from":"w1","kind":"spawned","ts":2}],"truncated":false}`+"\n"+
			`{"type":"replayEnd"}`+"\n")
		fleet <- err
	}()
	c, err := Handshake(t.Context(), clientSide, "token", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := next(t, c)
	hy, ok := f.m.(*protocol.Hydrate)
	if !ok || !f.replay {
		t.Fatalf("got %T", f.m)
	}
	if c.Skipped() != 1 || len(hy.Conversation) != 1 || len(hy.Transcripts) != 1 || hy.Transcripts[0].Agent != "w1" || len(hy.Hub) != 1 {
		t.Fatalf("skipped %d, hydrate %+v", c.Skipped(), hy)
	}
	if _, ok := next(t, c).m.(*protocol.ReplayEnd); !ok || c.Skipped() != 0 {
		t.Fatalf("replayEnd: skipped %d", c.Skipped())
	}
	if err := <-fleet; err != nil {
		t.Fatal(err)
	}
}
