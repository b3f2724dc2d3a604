package controlsock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// On Windows go-winio completes every pipe's I/O in one goroutine, started
// with the first pipe and never stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Microsoft/go-winio.ioCompletionProcessor"))
}

func TestHelloWelcomeReplayOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Broadcast(&protocol.FleetState{Ts: 1})
	h.srv.Broadcast(&protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/help"}}})
	h.srv.Broadcast(&protocol.AskRequest{ID: "a1", Question: "q?", Kind: "freeform", Ts: 111})
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "c1", Summary: "ok?", Ts: 222})
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "c2", Summary: "gone", Ts: 333})
	h.srv.Broadcast(&protocol.ConfirmResolved{ID: "c2", Approved: false, Kind: protocol.KindConfirm, Reason: protocol.ReasonExpired})
	h.srv.Broadcast(&protocol.FleetState{Ts: 2})
	h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: "line", Agent: "w1", Ts: 5})

	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl","clientName":"t"}`)
	w, ok := c.next().(*protocol.Welcome)
	if !ok {
		t.Fatal("first frame is not welcome")
	}
	if w.SessionID != "s1" || w.Cwd != "/tmp" || w.SessionName != "test" || w.ProtocolVersion == nil || *w.ProtocolVersion != 1 {
		t.Fatalf("welcome %+v", w)
	}
	if got := strings.Join(w.Capabilities, ","); got != "replayEnd,confirmResolvedReason,requestIdEcho" {
		t.Fatalf("capabilities %q", got)
	}
	var got []string
	for {
		m := c.next()
		desc := m.MessageType()
		switch m := m.(type) {
		case *protocol.AskRequest:
			desc += ":" + m.ID + fmt.Sprint(m.Ts)
		case *protocol.ConfirmRequest:
			desc += ":" + m.ID + fmt.Sprint(m.Ts)
		case *protocol.FleetState:
			desc += fmt.Sprint(m.Ts)
		case *protocol.Hydrate:
			desc += fmt.Sprintf(":%d", len(m.Transcripts))
		}
		got = append(got, desc)
		if m.MessageType() == protocol.TypeReplayEnd {
			break
		}
	}
	want := "commandCatalog hydrate:1 askRequest:a1111 confirmRequest:c1222 fleetState2 replayEnd"
	if strings.Join(got, " ") != want {
		t.Fatalf("replay\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	// Live frames follow.
	h.srv.Broadcast(&protocol.Reply{Text: "live"})
	if r := c.nextOf(protocol.TypeReply).(*protocol.Reply); r.Text != "live" {
		t.Fatal(r.Text)
	}
}

// TestReplayKeepsWhatTheClassSays broadcasts a frame of every server →
// client type before a client attaches: its replay holds what
// protocol.ClassOf says is replayed, in the protocol's order, and nothing
// else (history frames reach it inside hydrate).
func TestReplayKeepsWhatTheClassSays(t *testing.T) {
	h := newHarness(t, nil)
	var want []string
	var requests []string
	for _, typ := range protocol.Types() {
		m := protocol.New(typ)
		switch m := m.(type) {
		case *protocol.ConfirmRequest:
			m.ID = "c1"
		case *protocol.AskRequest:
			m.ID = "a1"
		case *protocol.ConfirmResolved:
			m.ID = "nothing pending"
		case *protocol.Transcript:
			m.Role, m.Agent, m.Text, m.Ts = protocol.RoleTool, "w1", "line", 5
		}
		switch protocol.ClassOf(m) {
		case protocol.ClassInbound:
			continue
		case protocol.ClassRequest:
			if typ != protocol.TypeConfirmResolved {
				requests = append(requests, typ)
			}
		}
		h.srv.Broadcast(m)
	}
	want = append(want, protocol.SnapshotTypes()...)
	want = append(want, protocol.TypeHydrate)
	want = append(want, requests...)
	want = append(want, protocol.TypeFleetState, protocol.TypeReplayEnd)

	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}`)
	if _, ok := c.next().(*protocol.Welcome); !ok {
		t.Fatal("first frame is not welcome")
	}
	var got []string
	for {
		m := c.next()
		got = append(got, m.MessageType())
		if h, ok := m.(*protocol.Hydrate); ok && (len(h.Conversation) != 2 || len(h.Transcripts) != 1 || len(h.Hub) != 1) {
			t.Errorf("hydrate holds %d conversation entries, %d lines, %d hub events; want the 2, 1 and 1 broadcast",
				len(h.Conversation), len(h.Transcripts), len(h.Hub))
		}
		if m.MessageType() == protocol.TypeReplayEnd {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("replay\n got %v\nwant %v", got, want)
	}
}

func TestHelloTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HelloTimeout = 100 * time.Millisecond })
	c := h.dial()
	if msg := c.expectError(); !strings.Contains(msg, "no hello") {
		t.Fatalf("error %q", msg)
	}
	c.expectClosed()
}

func TestWrongTokenAndWrongFirstFrame(t *testing.T) {
	h := newHarness(t, nil)
	for name, frame := range map[string]string{
		"wrong token":   `{"type":"hello","token":"nope","clientKind":"repl"}`,
		"not hello":     `{"type":"ping"}`,
		"bad kind":      `{"type":"hello","token":"` + testToken + `","clientKind":"root"}`,
		"future proto":  `{"type":"hello","token":"` + testToken + `","clientKind":"repl","protocolVersion":2}`,
		"invalid json":  `{"type":"hello",`,
		"token as num":  `{"type":"hello","token":5,"clientKind":"repl"}`,
		"missing token": `{"type":"hello","clientKind":"repl"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := h.dial()
			c.sendRaw(frame)
			msg := c.expectError()
			if name == "wrong token" && strings.Contains(msg, testToken) {
				t.Fatal("error leaks the token")
			}
			if name == "future proto" && !strings.Contains(msg, "protocol version 1") {
				t.Fatalf("error %q does not say what the server speaks", msg)
			}
			c.expectClosed()
		})
	}
	if got := h.srv.Stats().AuthFailures; got < 6 {
		t.Fatalf("auth failures counted: %d", got)
	}
}

func TestProtocolVersionOneAndOlderAccepted(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"bot","protocolVersion":1}`)
	if c.next().MessageType() != protocol.TypeWelcome {
		t.Fatal("no welcome")
	}
}

func TestBadFramesAfterHelloKeepConnection(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("bad")
	cases := []struct{ frame, want string }{
		{`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}`, "already authenticated"},
		{`{not json`, ""},
		{`[1,2]`, ""},
		{`{"type":"prompt","text":5}`, "text"},
		{`{"type":"prompt"}`, "text"},
		{`{"type":"confirmResponse","id":"x","approve":"yes"}`, "approve"},
		{`{"type":"askResponse","id":7,"text":"a"}`, "id"},
		{`{"type":"prompt","text":"hi","requestId":""}`, "requestId"},
		{`{"type":"prompt","text":"hi","requestId":"` + strings.Repeat("r", 257) + `"}`, "requestId"},
		{`{"type":"confirmResponse","id":"nope","approve":true}`, "no pending request"},
		{`{"type":"askResponse","id":"nope","text":"a"}`, "no pending request"},
		{`{"type":"welcome"}`, "server message"},
	}
	for _, tc := range cases {
		c.sendRaw(tc.frame)
		msg := c.expectError()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("frame %s: error %q, want it to mention %q", tc.frame, msg, tc.want)
		}
		c.alive()
	}
	// Unknown types are ignored: the next frame is the pong.
	c.sendRaw(`{"type":"fromTheFuture","x":1}`)
	c.alive()
	h.be.mu.Lock()
	defer h.be.mu.Unlock()
	if len(h.be.prompts) != 0 {
		t.Fatalf("bad prompts reached the fleet: %v", h.be.prompts)
	}
}

func TestPromptEchoedToAllWithRequestID(t *testing.T) {
	h := newHarness(t, nil)
	a, _ := h.attach("alice")
	b, _ := h.attach("")
	a.sendRaw(`{"type":"prompt","text":"$ make","requestId":"r-1"}`)
	for _, c := range []*tconn{a, b} {
		um := c.nextOf(protocol.TypeUserMessage).(*protocol.UserMessage)
		if um.Text != "$ make" || um.RequestID != "r-1" || um.Source != "alice" {
			t.Fatalf("userMessage %+v", um)
		}
	}
	b.sendRaw(`{"type":"prompt","text":"hello"}`)
	um := a.nextOf(protocol.TypeUserMessage).(*protocol.UserMessage)
	if um.Source != "other" || um.RequestID != "" {
		t.Fatalf("source falls back to clientKind: %+v", um)
	}
	testwait.For(t, testwait.Bound, "prompts routed", func() bool {
		h.be.mu.Lock()
		defer h.be.mu.Unlock()
		return len(h.be.prompts) == 2
	})
}

func TestAnswersResolveForEveryone(t *testing.T) {
	h := newHarness(t, nil)
	h.be.mu.Lock()
	h.be.choices["a1"] = []string{"staging", "prod"}
	h.be.confirms["c1"] = true
	h.be.mu.Unlock()
	h.srv.Broadcast(&protocol.AskRequest{ID: "a1", Question: "env?", Kind: "choice",
		Choices: []protocol.AskChoiceOption{{Label: "staging", Value: "staging"}, {Label: "prod", Value: "prod"}}})
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "c1", Summary: "go?"})
	a, _ := h.attach("a")
	b, _ := h.attach("b")

	a.sendRaw(`{"type":"askResponse","id":"a1","text":"dev"}`)
	if msg := a.expectError(); !strings.Contains(msg, "one of") {
		t.Fatal(msg)
	}
	a.sendRaw(`{"type":"askResponse","id":"a1","text":"prod"}`)
	for _, c := range []*tconn{a, b} {
		r := c.nextOf(protocol.TypeConfirmResolved).(*protocol.ConfirmResolved)
		if r.ID != "a1" || r.Kind != protocol.KindAsk || r.Reason != protocol.ReasonAnswered || !r.Approved {
			t.Fatalf("resolved %+v", r)
		}
	}
	b.sendRaw(`{"type":"askResponse","id":"a1","text":"prod"}`)
	b.expectError() // already resolved
	b.sendRaw(`{"type":"confirmResponse","id":"c1","approve":false}`)
	r := a.nextOf(protocol.TypeConfirmResolved).(*protocol.ConfirmResolved)
	if r.ID != "c1" || r.Approved || r.Reason != protocol.ReasonAnswered {
		t.Fatalf("resolved %+v", r)
	}
	// A late attach sees no resolved requests in its replay.
	_, types := h.attach("late")
	for _, typ := range types {
		if typ == protocol.TypeAskRequest || typ == protocol.TypeConfirmRequest {
			t.Fatalf("resolved request replayed: %v", types)
		}
	}
}

func TestTerminalSurfaceAnswersAsSuperseded(t *testing.T) {
	h := newHarness(t, nil)
	h.be.mu.Lock()
	h.be.confirms["c1"] = true
	h.be.mu.Unlock()
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "c1", Summary: "go?"})
	sock, _ := h.attach("sock")
	// The terminal console is an in-process pipe.
	srvSide, termSide := netPipe()
	h.srv.ServeConn(srvSide, SurfaceTerminal)
	term := &tconn{t: t, conn: termSide, r: protocol.NewReader(termSide, protocol.MaxFrameSize)}
	t.Cleanup(func() { termSide.Close() })
	term.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl","clientName":"terminal"}`)
	term.nextOf(protocol.TypeReplayEnd)
	term.sendRaw(`{"type":"confirmResponse","id":"c1","approve":true}`)
	r := sock.nextOf(protocol.TypeConfirmResolved).(*protocol.ConfirmResolved)
	if r.Reason != protocol.ReasonSuperseded || !r.Approved {
		t.Fatalf("resolved %+v", r)
	}
}

func TestOversizedFrameClosesConnection(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("big")
	big := `{"type":"prompt","text":"` + strings.Repeat("x", protocol.MaxFrameSize) + `"}`
	go c.conn.Write([]byte(big + "\n")) // the server stops reading mid-frame
	if msg := c.expectError(); !strings.Contains(msg, "exceeds") {
		t.Fatal(msg)
	}
	c.expectClosed()
	testwait.For(t, testwait.Bound, "client removed", func() bool { return h.srv.Stats().Clients == 0 })
	if h.srv.Stats().FramesTooLarge != 1 {
		t.Fatal("not counted")
	}
}

// endless yields bytes without a newline, counting what was read.
type endless struct {
	mu sync.Mutex
	n  int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.mu.Lock()
	e.n += len(p)
	e.mu.Unlock()
	return len(p), nil
}

func TestNoNewlineStreamIsCutAtTheCap(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("stream")
	src := &endless{}
	copyDone := make(chan struct{})
	go func() {
		defer close(copyDone)
		io.Copy(c.conn, io.LimitReader(src, 64<<20))
	}()
	if msg := c.expectError(); !strings.Contains(msg, "exceeds") {
		t.Fatal(msg)
	}
	c.expectClosed()
	c.conn.Close()
	<-copyDone
	src.mu.Lock()
	sent := src.n
	src.mu.Unlock()
	// The server stopped reading right after the cap (plus what the kernel
	// buffers), far from the 64 MiB on offer.
	if sent > 16<<20 {
		t.Fatalf("server consumed %d bytes of a newline-less stream", sent)
	}
}

func TestAbruptDisconnectMidFrame(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("abrupt")
	other, _ := h.attach("other")
	c.conn.Write([]byte(`{"type":"prompt","te`))
	c.conn.Close()
	testwait.For(t, testwait.Bound, "client removed", func() bool { return h.srv.Stats().Clients == 1 })
	h.srv.Broadcast(&protocol.Reply{Text: "still here"})
	if other.nextOf(protocol.TypeReply).(*protocol.Reply).Text != "still here" {
		t.Fatal("other client lost")
	}
}

func TestSlowConsumerEvictedByQueueBytes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxQueueBytes = 1 << 20; c.WriteTimeout = time.Minute })
	stalled, _ := h.attach("stalled") // never reads again
	fast, _ := h.attach("fast")
	const n = 20000
	text := strings.Repeat("y", 180)
	var got atomic.Int64
	recv := make(chan struct{})
	go func() {
		defer close(recv)
		for got.Load() < n {
			fast.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			f, err := fast.r.ReadFrame()
			if err != nil {
				return
			}
			if bytes.Contains(f, []byte(`"transcript"`)) {
				got.Add(1)
			}
		}
	}()
	for i := range n {
		h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: fmt.Sprint("w", i%4)})
		if i%1000 == 999 {
			// A healthy consumer keeps up with a worker's pace; the stalled
			// one falls further behind with every batch.
			testwait.For(t, testwait.Bound, "fast client to catch up", func() bool { return got.Load() > int64(i)-500 })
		}
	}
	<-recv
	if got.Load() != n {
		t.Fatalf("healthy client got %d of %d frames", got.Load(), n)
	}
	testwait.For(t, testwait.Bound, "stalled client evicted", func() bool { return h.srv.Stats().SlowQueue == 1 })
	if h.srv.Stats().SlowDeadline != 0 {
		t.Fatal("wrong trigger counted")
	}
	stalled.expectClosedAfterReading()
}

func TestSlowConsumerEvictedByWriteDeadline(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxQueueBytes = 64 << 20; c.WriteTimeout = 200 * time.Millisecond })
	stalled, _ := h.attach("stalled")
	text := strings.Repeat("z", 1000)
	// Enough to fill the socket buffers so a write blocks past its deadline.
	for range 20000 {
		h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1"})
	}
	testwait.For(t, testwait.Bound, "deadline eviction", func() bool { return h.srv.Stats().SlowDeadline == 1 })
	if h.srv.Stats().SlowQueue != 0 {
		t.Fatal("wrong trigger counted")
	}
	stalled.expectClosedAfterReading()
}

func TestManyClients(t *testing.T) {
	h := newHarness(t, nil)
	const n = 200
	var wg sync.WaitGroup
	conns := make([]*tconn, n)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialAndAttach(h.path, fmt.Sprint("c", i))
			if err != nil {
				errs <- err
				return
			}
			conns[i] = &tconn{t: t, conn: c.conn, r: c.r}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if h.srv.Stats().Clients != n {
		t.Fatalf("clients %d", h.srv.Stats().Clients)
	}
	h.srv.Broadcast(&protocol.Reply{Text: "to all"})
	for _, c := range conns {
		t.Cleanup(func() { c.conn.Close() })
		if c.nextOf(protocol.TypeReply).(*protocol.Reply).Text != "to all" {
			t.Fatal("missing broadcast")
		}
	}
}

func TestMaxClients(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxClients = 2 })
	h.attach("1")
	h.attach("2")
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}`)
	if msg := c.expectError(); !strings.Contains(msg, "too many") {
		t.Fatal(msg)
	}
	c.expectClosed()
}

func TestNativeRootInLegacySession(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("n")
	c.sendRaw(`{"type":"nativeRoot","id":"read-1","request":{"action":"list"}}`)
	m := c.next().(*protocol.NativeRootResult)
	if m.ID == nil || *m.ID != "read-1" || m.Result.Kind != "error" || m.Result.Code != "native_mode_required" {
		t.Fatalf("%s", mustJSON(m))
	}
	// Refusals are nativeRootResult errors too, with id null when invalid.
	c.sendRaw(`{"type":"nativeRoot","id":5,"request":{"action":"list"}}`)
	m = c.next().(*protocol.NativeRootResult)
	if m.ID != nil || m.Result.Kind != "error" {
		t.Fatalf("%s", mustJSON(m))
	}
	for name, frame := range map[string]string{
		"extra top-level key": `{"type":"nativeRoot","id":"x","request":{"action":"list"},"principal":"admin"}`,
		"extra request key":   `{"type":"nativeRoot","id":"x","request":{"action":"list","role":"owner"}}`,
		"string revision":     `{"type":"nativeRoot","id":"x","request":{"action":"pause","rootId":"r","operationId":"o","expectedRevision":"3"}}`,
		"over 16 KiB":         `{"type":"nativeRoot","id":"x","request":{"action":"status","rootId":"` + strings.Repeat("r", 17<<10) + `"}}`,
	} {
		c.sendRaw(frame)
		m = c.next().(*protocol.NativeRootResult)
		if m.Result.Kind != "error" || m.Result.Code == "native_mode_required" || m.Result.Code == "" {
			t.Fatalf("%s not refused: %s", name, mustJSON(m))
		}
		if name == "over 16 KiB" && m.Result.Code != "frame_too_large" {
			t.Fatalf("%s: %s", name, mustJSON(m))
		}
	}
	c.alive()
}

func TestShutdownFlushesQueuedFrames(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.attach("flush")
	h.srv.Broadcast(&protocol.ConfirmResolved{ID: "c9", Kind: protocol.KindConfirm, Reason: protocol.ReasonCancelled})
	go h.srv.Shutdown(t.Context())
	r := c.nextOf(protocol.TypeConfirmResolved).(*protocol.ConfirmResolved)
	if r.Reason != protocol.ReasonCancelled {
		t.Fatal(r.Reason)
	}
	c.expectClosed()
}

// A connection accepted just as Shutdown begins is closed, not served:
// Shutdown may already be waiting for the server's goroutines.
func TestServeConnAfterShutdownClosesIt(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	ours, theirs := net.Pipe()
	defer ours.Close()
	h.srv.ServeConn(theirs, SurfaceSocket)
	ours.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := ours.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read from a connection served after Shutdown: %v, want EOF", err)
	}
}

func TestSeededHistoryIsHydrated(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.History.Conversation = 2 })
	h.srv.SeedHistory(&protocol.Hydrate{
		Conversation: []protocol.HydrateConversationEntry{{Role: "user", Text: "old prompt", Ts: 1}, {Role: "assistant", Text: "old reply", Ts: 2}},
		Transcripts:  []protocol.HydrateTranscriptEntry{{Agent: "w1", Role: protocol.RoleTool, Text: "old line", Ts: 3}},
		Hub:          []protocol.HubEvent{{From: "w1", Kind: "completed", Ts: 4}},
	}, 10)
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}`)
	hy := c.nextOf(protocol.TypeHydrate).(*protocol.Hydrate)
	if len(hy.Conversation) != 2 || hy.Conversation[0].Text != "old prompt" || !hy.Truncated ||
		len(hy.Transcripts) != 1 || hy.Transcripts[0].Text != "old line" || len(hy.Hub) != 1 {
		t.Fatalf("%+v", hy)
	}
}

// A full window is larger than one frame may be: hydrate keeps the newest
// lines that fit under the cap instead of failing to encode.
func TestHydrateFitsTheFrameCap(t *testing.T) {
	h := newHarness(t, nil)
	line := strings.Repeat("L", 400)
	for a := range 64 {
		for i := range 200 {
			h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: line, Agent: fmt.Sprint("w", a), Ts: int64(1000 + a*200 + i)})
		}
	}
	h.srv.Broadcast(&protocol.HubEvent{From: "w1", Kind: "completed", Ts: 5, Text: "t1 done"})
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}`)
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if typ, _ := protocol.PeekType(f); typ != protocol.TypeHydrate {
			continue
		}
		if len(f) > protocol.MaxFrameSize {
			t.Fatalf("hydrate of %d bytes", len(f))
		}
		m, err := protocol.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		hy := m.(*protocol.Hydrate)
		n := len(hy.Transcripts)
		if n < 1000 || n >= 64*200 || len(hy.Hub) != 1 || hy.Hub[0].Text != "t1 done" {
			t.Fatalf("%d lines, hub %+v", n, hy.Hub)
		}
		// The newest lines are the ones kept, oldest first.
		if last := hy.Transcripts[n-1]; last.Ts != 1000+64*200-1 || last.Agent != "w63" || last.Text != line || last.Role != protocol.RoleTool {
			t.Fatalf("last line %+v", last)
		}
		if hy.Transcripts[0].Ts > hy.Transcripts[n-1].Ts {
			t.Fatal("not oldest first")
		}
		return
	}
}

// Defence in depth: even with the token, a connection from another uid is
// refused (SO_PEERCRED), before the hello is read.
func TestOtherUIDRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux only (peercred_linux.go)")
	}
	other := os.Getuid() + 1
	h := newHarness(t, func(c *Config) { c.AllowUID = &other })
	c := h.dial()
	// The server may already have refused and closed: a failed write is fine.
	c.conn.Write([]byte(`{"type":"hello","token":"` + testToken + `","clientKind":"repl"}` + "\n"))
	if msg := c.expectError(); !strings.Contains(msg, "another user") {
		t.Fatal(msg)
	}
	c.expectClosed()
}

// TestBatchRunsAndWindowSlots: BroadcastBatch hands clients runs of
// contiguous frames and the replay window copies lines into the slots it
// reuses. A live client gets every frame of many batches byte for byte in
// order (lines of varying length, a long line that outgrows the batch's
// buffer, other types mixed in), and a late client's hydrate holds each
// agent's newest lines exactly, after the rings have turned over several
// times.
func TestBatchRunsAndWindowSlots(t *testing.T) {
	h := newHarness(t, nil)
	live, _ := h.attach("live")
	var want [][]byte
	lines := map[string][]string{}
	n := 0
	for b := range 40 {
		var batch []protocol.Message
		for i := range 37 {
			agent := fmt.Sprint("w", (b+i)%3)
			text := fmt.Sprintf("b%d i%d %s", b, i, strings.Repeat("x", (b*7+i*13)%300))
			if i == 20 && b%5 == 0 {
				text += strings.Repeat("é\"\\\t", 4000) // escapes beyond the size hint
			}
			n++
			batch = append(batch, &protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: agent, Ts: int64(n)})
			lines[agent] = append(lines[agent], text)
			if i == 10 {
				batch = append(batch, &protocol.HubEvent{From: agent, Kind: "note", Ts: int64(n), Text: "hub " + text[:8]})
			}
		}
		for _, m := range batch {
			f, err := protocol.Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, f)
		}
		h.srv.BroadcastBatch(batch)
	}
	live.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i, w := range want {
		f, err := live.r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(f, bytes.TrimSuffix(w, []byte("\n"))) {
			t.Fatalf("frame %d:\n got %.200q\nwant %.200q", i, f, w)
		}
	}

	late := h.dial()
	late.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"other"}`)
	hy := late.nextOf(protocol.TypeHydrate).(*protocol.Hydrate)
	got := map[string][]string{}
	for _, l := range hy.Transcripts {
		got[l.Agent] = append(got[l.Agent], l.Text)
	}
	for agent, all := range lines {
		g := got[agent]
		if len(g) == 0 || len(g) > 200 {
			t.Fatalf("%s: %d lines in hydrate", agent, len(g))
		}
		if !slices.Equal(g, all[len(all)-len(g):]) {
			t.Fatalf("%s: hydrate lines are not the agent's newest %d", agent, len(g))
		}
	}
}

// TestPooledBatchesAreNotReusedEarly: broadcast batches are encoded into
// pooled buffers that go back to the pool once every client wrote them. A
// buffer given back early would be re-encoded while a slower client still
// had it queued, and that client would read a later batch's bytes. Fast
// and slow readers must each get every frame byte for byte.
func TestPooledBatchesAreNotReusedEarly(t *testing.T) {
	h := newHarness(t, nil)
	const clients, batches, perBatch = 5, 300, 30
	var want [][]byte
	var sent []protocol.Message
	for b := range batches {
		for i := range perBatch {
			text := fmt.Sprintf("b%d i%d %s", b, i, strings.Repeat(string(rune('a'+b%26)), 100+(b*31+i*7)%200))
			sent = append(sent, &protocol.Transcript{Role: protocol.RoleTool, Text: text, Agent: "w1", Ts: int64(b*perBatch + i)})
			f, err := protocol.Encode(sent[len(sent)-1])
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, bytes.TrimSuffix(f, []byte("\n")))
		}
	}
	conns := make([]*tconn, clients)
	for i := range conns {
		conns[i], _ = h.attach(fmt.Sprint("c", i))
	}
	errs := make(chan error, clients)
	for i, c := range conns {
		go func() {
			c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			for n, w := range want {
				if i == 0 && n%50 == 0 {
					time.Sleep(time.Millisecond) // the slow reader
				}
				f, err := c.r.ReadFrame()
				if err != nil {
					errs <- fmt.Errorf("client %d, frame %d: %v", i, n, err)
					return
				}
				if !bytes.Equal(f, w) {
					errs <- fmt.Errorf("client %d, frame %d:\n got %.80q\nwant %.80q", i, n, f, w)
					return
				}
			}
			errs <- nil
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for b := range batches {
		h.srv.Throttle(ctx) // as the engine does: nobody is evicted
		h.srv.BroadcastBatch(sent[b*perBatch : (b+1)*perBatch])
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestBatchBufReleasedTwicePanics(t *testing.T) {
	bb := getBatchBuf(maxPooledBatch + 1) // too big to pool: no other test can get it
	bb.retain()
	bb.release()
	bb.release()
	defer func() {
		if recover() == nil {
			t.Fatal("a third release of a buffer with two references did not panic")
		}
	}()
	bb.release()
}

// An answer the fleet refuses with a typed error gets that error frame,
// code and id included, and before the pong of a ping sent after it: a
// client that sees the pong first knows its answer was taken.
func TestRefusedAnswerErrorFrameBeforePong(t *testing.T) {
	h := newHarness(t, nil)
	h.be.mu.Lock()
	h.be.choices["a1"] = nil // freeform
	h.be.mu.Unlock()
	c, _ := h.attach("answerer")
	c.sendRaw(`{"type":"askResponse","id":"gone","text":"x"}`)
	c.sendRaw(`{"type":"ping"}`)
	e, ok := c.next().(*protocol.Error)
	if !ok || e.Code != protocol.ErrCodeRequestUnknown || e.ID != "gone" || !strings.Contains(e.Message, "no pending request") {
		t.Fatalf("refusal %+v, want an error with code %s and id gone", e, protocol.ErrCodeRequestUnknown)
	}
	if m := c.next(); m.MessageType() != protocol.TypePong {
		t.Fatalf("after the refusal: %s, want pong", mustJSON(m))
	}
	// A taken answer: no error before the pong.
	c.sendRaw(`{"type":"askResponse","id":"a1","text":"anything"}`)
	c.sendRaw(`{"type":"ping"}`)
	for {
		m := c.next()
		if _, isErr := m.(*protocol.Error); isErr {
			t.Fatalf("a taken answer got %s", mustJSON(m))
		}
		if m.MessageType() == protocol.TypePong {
			break
		}
	}
}
