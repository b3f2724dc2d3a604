package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// fakeFleet is a Backend that raises confirms and asks on demand and
// records prompts and answers.
type fakeFleet struct {
	srv *controlsock.Server

	mu      sync.Mutex
	prompts []string
	answers []string
	pending map[string]*protocol.AskRequest // nil value: a confirm
}

func (f *fakeFleet) Prompt(m *protocol.UserMessage) {
	f.srv.Broadcast(m)
	f.mu.Lock()
	f.prompts = append(f.prompts, m.Source+": "+m.Text)
	f.mu.Unlock()
}

func (f *fakeFleet) AnswerConfirm(id string, approve bool, reason string) error {
	f.mu.Lock()
	ask, ok := f.pending[id]
	if !ok || ask != nil {
		f.mu.Unlock()
		return fmt.Errorf("no pending confirmation %s", id)
	}
	delete(f.pending, id)
	f.answers = append(f.answers, fmt.Sprintf("%s=%v", id, approve))
	f.mu.Unlock()
	f.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: approve, Kind: protocol.KindConfirm, Reason: protocol.ResolvedReason(reason)})
	return nil
}

func (f *fakeFleet) AnswerAsk(id, text, reason string) error {
	f.mu.Lock()
	ask := f.pending[id]
	if ask == nil {
		f.mu.Unlock()
		return fmt.Errorf("no pending question %s", id)
	}
	if len(ask.Choices) > 0 {
		var values []string
		for _, c := range ask.Choices {
			values = append(values, c.Value)
		}
		if !slices.Contains(values, text) {
			f.mu.Unlock()
			return fmt.Errorf("%q is not one of the choices (%s)", text, strings.Join(values, ", "))
		}
	}
	delete(f.pending, id)
	f.answers = append(f.answers, id+"="+text)
	f.mu.Unlock()
	f.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: true, Kind: protocol.KindAsk, Reason: protocol.ResolvedReason(reason)})
	return nil
}

func (f *fakeFleet) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "unsupported"}
}

func (f *fakeFleet) confirm(id, summary string) {
	f.mu.Lock()
	f.pending[id] = nil
	f.mu.Unlock()
	f.srv.Broadcast(&protocol.ConfirmRequest{ID: id, Summary: summary, Ts: time.Now().UnixMilli()})
}

func (f *fakeFleet) ask(id, question string, choices ...string) {
	a := &protocol.AskRequest{ID: id, Question: question, Kind: "choice", Ts: time.Now().UnixMilli()}
	for _, c := range choices {
		a.Choices = append(a.Choices, protocol.AskChoiceOption{Label: c, Value: c})
	}
	f.mu.Lock()
	f.pending[id] = a
	f.mu.Unlock()
	f.srv.Broadcast(a)
}

// waitRecorded waits until get returns a list containing want.
func (f *fakeFleet) waitRecorded(t *testing.T, what string, get func() []string, want string) {
	t.Helper()
	var got []string
	if !testwait.Until(testwait.Bound, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		got = slices.Clone(get())
		return slices.Contains(got, want)
	}) {
		t.Fatalf("%s: %q never recorded; have %q", what, want, got)
	}
}

type testFleet struct {
	*fakeFleet
	path, token string
}

func startFleet(t *testing.T) *testFleet {
	t.Helper()
	dir, err := os.MkdirTemp("", "co")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeFleet{pending: map[string]*protocol.AskRequest{}}
	tf := &testFleet{fakeFleet: f, path: filepath.Join(dir, "f.sock"), token: "secret-token"}
	f.srv = controlsock.New(controlsock.Config{Token: tf.token, Backend: f, Welcome: protocol.Welcome{SessionID: "s1"}})
	ln, err := controlsock.Listen(tf.path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { f.srv.Serve(ln); close(served) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { tf.stop(); <-served }) })
	return tf
}

func (tf *testFleet) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tf.srv.Shutdown(ctx)
}

func (tf *testFleet) dial(t *testing.T, kind protocol.ClientKind, name string) *client.Conn {
	t.Helper()
	c, err := client.DialSocket(t.Context(), tf.path, tf.token, client.Options{ClientKind: kind, ClientName: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// output is an io.Writer the test can wait on.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newOutput() *output { return &output{} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output contains s.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	if !testwait.Until(testwait.Bound, func() bool { return strings.Contains(o.String(), s) }) {
		t.Fatalf("output never contained %q:\n%s", s, o.String())
	}
}

// session runs a REPL on a fresh connection with stdin fed through a pipe.
type session struct {
	in   *io.PipeWriter
	out  *output
	done chan error
}

func startREPL(t *testing.T, tf *testFleet) *session {
	t.Helper()
	conn := tf.dial(t, "repl", "attach@test")
	pr, pw := io.Pipe()
	s := &session{in: pw, out: newOutput(), done: make(chan error, 1)}
	r := &REPL{In: pr, Out: s.out, Conn: conn}
	go func() { s.done <- r.Run(t.Context()) }()
	t.Cleanup(func() { pw.Close() })
	return s
}

func (s *session) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatalf("type %q: %v", line, err)
	}
}

func (s *session) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("REPL did not exit; output:\n%s", s.out.String())
		return nil
	}
}

func TestREPL(t *testing.T) {
	tf := startFleet(t)
	tf.confirm("confirm-1", "Deploy to prod?")
	s := startREPL(t, tf)

	// The pending confirm is replayed as history, then the live marker.
	s.out.waitFor(t, "· ? [confirm-1] Deploy to prod? (/yes or /no)")
	s.out.waitFor(t, LiveMarker)

	// A typed prompt is printed once, by the REPL, not again on its echo.
	s.typeLine(t, "make test")
	tf.waitRecorded(t, "prompt", func() []string { return tf.prompts }, "attach@test: make test")
	// Another client's prompt is shown with its source; it arrives after
	// our echo, so by then the echo has been handled.
	other := tf.dial(t, "bot", "bot")
	if _, err := other.Prompt("from the bot"); err != nil {
		t.Fatal(err)
	}
	s.out.waitFor(t, "bot: from the bot")
	if n := strings.Count(s.out.String(), "make test"); n != 1 {
		t.Errorf("prompt printed %d times:\n%s", n, s.out.String())
	}
	if !strings.Contains(s.out.String(), "you: make test") {
		t.Errorf("no you: line:\n%s", s.out.String())
	}

	// /yes with one pending confirm needs no id.
	s.typeLine(t, "/yes")
	tf.waitRecorded(t, "answer", func() []string { return tf.answers }, "confirm-1=true")
	s.out.waitFor(t, "✓ confirm-1 answered (approved)")

	// /answer 2 picks the second choice.
	tf.ask("ask-1", "Which env?", "staging", "prod")
	s.out.waitFor(t, "? [ask-1] Which env? choices: 1) staging 2) prod")
	s.typeLine(t, "/answer 2")
	tf.waitRecorded(t, "answer", func() []string { return tf.answers }, "ask-1=prod")
	s.out.waitFor(t, "✓ ask-1 answered")

	// A number outside the choices goes to the fleet, whose error is shown.
	tf.ask("ask-2", "Which region?", "eu", "us")
	s.out.waitFor(t, "[ask-2]")
	s.typeLine(t, "/answer ask-2 5")
	s.out.waitFor(t, `error: "5" is not one of the choices (eu, us)`)

	// The REPL still runs; /pending lists what is open.
	s.typeLine(t, "/pending")
	s.out.waitFor(t, "? [ask-2] Which region? choices: 1) eu 2) us (/answer <n>)\n")

	// Several confirms pending: /no without an id asks for one.
	tf.confirm("confirm-2", "A?")
	tf.confirm("confirm-3", "B?")
	s.out.waitFor(t, "[confirm-3]")
	s.typeLine(t, "/no")
	s.out.waitFor(t, "2 confirmations pending (confirm-2, confirm-3); name one: /no <id>")
	s.typeLine(t, "/no confirm-3")
	tf.waitRecorded(t, "answer", func() []string { return tf.answers }, "confirm-3=false")

	// /status summarises the latest snapshot without printing it live.
	tf.srv.Broadcast(&protocol.Status{Processing: true, Model: "local"})
	tf.srv.Broadcast(&protocol.Reply{Text: "after status"})
	s.out.waitFor(t, "fleet: after status")
	s.typeLine(t, "/status")
	s.out.waitFor(t, "coordinator: processing, model local")

	s.typeLine(t, "/quit")
	if err := s.wait(t); err != nil {
		t.Fatalf("Run after /quit = %v", err)
	}
}

func TestREPLEOF(t *testing.T) {
	tf := startFleet(t)
	s := startREPL(t, tf)
	s.out.waitFor(t, "attached")
	s.in.Close()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run at EOF = %v", err)
	}
}

func TestREPLConnectionClosed(t *testing.T) {
	tf := startFleet(t)
	s := startREPL(t, tf)
	s.out.waitFor(t, "attached")
	tf.stop()
	err := s.wait(t)
	var ce *ClosedError
	if !errors.As(err, &ce) {
		t.Fatalf("Run after shutdown = %v, want *ClosedError", err)
	}
	if !strings.Contains(err.Error(), "closed") {
		t.Errorf("error = %q", err)
	}
}

func TestChoose(t *testing.T) {
	ask := &protocol.AskRequest{Choices: []protocol.AskChoiceOption{{Label: "Staging", Value: "stg"}, {Label: "Prod", Value: "2"}}}
	for in, want := range map[string]string{"1": "stg", "2": "2", "prod": "2", "stg": "stg", "3": "3", "x": "x"} {
		if got := choose(ask, in); got != want {
			t.Errorf("choose(%q) = %q, want %q", in, got, want)
		}
	}
	if got := choose(nil, "1"); got != "1" {
		t.Errorf("choose(nil, 1) = %q", got)
	}
}

func TestREPLLocalCommands(t *testing.T) {
	tf := startFleet(t)
	s := startREPL(t, tf)
	s.out.waitFor(t, "attached")

	s.typeLine(t, "/pending")
	s.out.waitFor(t, "no pending requests\n")
	s.typeLine(t, "/yes")
	s.out.waitFor(t, "no pending confirmation\n")
	s.typeLine(t, "/answer")
	s.out.waitFor(t, "usage: /answer [id] <text or choice number>\n")
	s.typeLine(t, "/answer 1")
	s.out.waitFor(t, "no pending question\n")

	// Unknown slash commands are the fleet's.
	s.typeLine(t, "/tasks")
	tf.waitRecorded(t, "prompt", func() []string { return tf.prompts }, "attach@test: /tasks")

	// A freeform question takes the text as typed; an id alone is not an answer.
	tf.mu.Lock()
	tf.pending["ask-f"] = &protocol.AskRequest{ID: "ask-f", Question: "Name?", Kind: "freeform"}
	tf.mu.Unlock()
	tf.srv.Broadcast(&protocol.AskRequest{ID: "ask-f", Question: "Name?", Kind: "freeform"})
	s.out.waitFor(t, "? [ask-f] Name? (/answer <text>)")
	before := strings.Count(s.out.String(), "usage:")
	s.typeLine(t, "/answer ask-f")
	s.typeLine(t, "/answer ask-f   the  answer ")
	tf.waitRecorded(t, "answer", func() []string { return tf.answers }, "ask-f=the  answer")
	if after := strings.Count(s.out.String(), "usage:"); after != before+1 {
		t.Errorf("an id alone did not print the usage:\n%s", s.out.String())
	}

	// Prompts with an explicit but unknown id still go to the fleet.
	s.typeLine(t, "/no confirm-zz")
	s.out.waitFor(t, "error: no pending confirmation confirm-zz")
	s.in.Close()
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
}

// The fleet's own terminal answers as "superseded" for every other console;
// the terminal itself shows its answer as answered.
func TestREPLOnTerminalSurface(t *testing.T) {
	tf := startFleet(t)
	tf.confirm("confirm-9", "Ship?")
	srvSide, termSide := net.Pipe()
	tf.srv.ServeConn(srvSide, controlsock.SurfaceTerminal)
	conn, err := client.Handshake(t.Context(), termSide, tf.token, client.Options{ClientKind: "repl", ClientName: "terminal"})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	s := &session{in: pw, out: newOutput(), done: make(chan error, 1)}
	go func() { s.done <- (&REPL{In: pr, Out: s.out, Conn: conn}).Run(t.Context()) }()
	watcher := startREPL(t, tf)
	watcher.out.waitFor(t, LiveMarker)
	s.out.waitFor(t, LiveMarker)

	s.typeLine(t, "/yes")
	s.out.waitFor(t, "✓ confirm-9 answered (approved)")
	watcher.out.waitFor(t, "✓ confirm-9 superseded: answered elsewhere (approved)")
	s.typeLine(t, "/quit")
	if err := s.wait(t); err != nil {
		t.Fatal(err)
	}
}

// TestREPLShowsHistoryWithABadEntry: a fleet of an earlier build sends
// its coordinator lines in hydrate without their agent; the console shows
// the rest of the history and says how many entries it skipped, instead of
// dropping all of it.
func TestREPLShowsHistoryWithABadEntry(t *testing.T) {
	serverSide, clientSide := net.Pipe()
	defer serverSide.Close()
	go func() {
		r := protocol.NewReader(serverSide, protocol.MaxFrameSize)
		if _, err := r.ReadFrame(); err != nil { // hello
			return
		}
		io.WriteString(serverSide, `{"type":"welcome","protocolVersion":1,"capabilities":["replayEnd"]}`+"\n"+
			`{"type":"hydrate","conversation":[{"role":"user","text":"add a greeting","ts":1},{"role":"assistant","text":"Two workers are on it.","ts":3}],`+
			`"transcripts":[{"role":"assistant","text":"I'll split this in two.","ts":2}],"hub":[],"truncated":false}`+"\n"+
			`{"type":"replayEnd"}`+"\n")
		serverSide.Close()
	}()
	conn, err := client.Handshake(t.Context(), clientSide, "token", client.Options{ClientKind: "repl"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &REPL{In: strings.NewReader(""), Out: &out, Conn: conn}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r.Run(ctx)
	got := out.String()
	for _, want := range []string{"add a greeting", "Two workers are on it.", "(1 history entry skipped: malformed)"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "malformed frame") {
		t.Errorf("the whole hydrate was refused:\n%s", got)
	}
}
