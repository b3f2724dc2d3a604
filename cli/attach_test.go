package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// This file holds the harness shared by the ls, attach, events and send
// tests: a registry in a short temp fleetHome, real control servers in front
// of a fake backend, and helpers to run a cobra command.

// fakeFleet is a Backend that raises confirms and asks on demand, replies to
// prompts, and records prompts and answers.
type fakeFleet struct {
	srv *controlsock.Server

	mu      sync.Mutex
	prompts []string
	answers []string
	pending map[string]*protocol.AskRequest // nil value: a confirm
	// resolved are the ids answered, by how; lost are ids another console
	// answers just before this one's answer arrives.
	resolved map[string]protocol.ResolvedReason
	lost     map[string]bool
}

// refuse is the refusal the engine sends for an answer to id it does not
// take (engine.broker.answer).
func (f *fakeFleet) refuseLocked(id string) error {
	if how, ok := f.resolved[id]; ok {
		return &protocol.Error{Message: fmt.Sprintf("request %s was already resolved: %s", id, how), Code: protocol.ErrCodeRequestResolved, ID: id}
	}
	return &protocol.Error{Message: fmt.Sprintf("no pending request with id %q", id), Code: protocol.ErrCodeRequestUnknown, ID: id}
}

// loseLocked resolves id as answered by another console, when the test
// set it up to lose that race; it reports whether it did.
func (f *fakeFleet) loseLocked(id string, kind protocol.ResolvedKind) bool {
	if !f.lost[id] {
		return false
	}
	delete(f.pending, id)
	f.resolved[id] = protocol.ReasonAnswered
	f.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: true, Kind: kind, Reason: protocol.ReasonAnswered})
	return true
}

// Prompt records the prompt and replies "echo: <text>", unless the text
// starts with "quiet"; to "/fail…" it replies with an error.
func (f *fakeFleet) Prompt(m *protocol.UserMessage) {
	f.srv.Broadcast(m)
	source, text := m.Source, m.Text
	f.mu.Lock()
	f.prompts = append(f.prompts, source+": "+text)
	f.mu.Unlock()
	switch {
	case strings.HasPrefix(text, "/fail"):
		f.srv.Broadcast(&protocol.Reply{Text: "failed: " + text, IsError: protocol.Bool(true)})
	case !strings.HasPrefix(text, "quiet"):
		f.srv.Broadcast(&protocol.Reply{Text: "echo: " + text})
	}
}

func (f *fakeFleet) AnswerConfirm(id string, approve bool, reason string) error {
	f.mu.Lock()
	f.loseLocked(id, protocol.KindConfirm)
	ask, ok := f.pending[id]
	if !ok {
		defer f.mu.Unlock()
		return f.refuseLocked(id)
	}
	if ask != nil {
		f.mu.Unlock()
		return &protocol.Error{Message: id + " is an ask request: answer it with askResponse", Code: protocol.ErrCodeAnswerInvalid, ID: id}
	}
	delete(f.pending, id)
	f.resolved[id] = protocol.ResolvedReason(reason)
	f.answers = append(f.answers, fmt.Sprintf("%s=%v", id, approve))
	f.mu.Unlock()
	f.srv.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: approve, Kind: protocol.KindConfirm, Reason: protocol.ResolvedReason(reason)})
	return nil
}

func (f *fakeFleet) AnswerAsk(id, text, reason string) error {
	f.mu.Lock()
	f.loseLocked(id, protocol.KindAsk)
	ask, ok := f.pending[id]
	if !ok {
		defer f.mu.Unlock()
		return f.refuseLocked(id)
	}
	if ask == nil {
		f.mu.Unlock()
		return &protocol.Error{Message: id + " is a confirm request: answer it with confirmResponse", Code: protocol.ErrCodeAnswerInvalid, ID: id}
	}
	var values []string
	for _, c := range ask.Choices {
		values = append(values, c.Value)
	}
	if len(values) > 0 && !slices.Contains(values, text) {
		f.mu.Unlock()
		return &protocol.Error{Message: fmt.Sprintf("%q is not one of the choices (%s)", text, strings.Join(values, ", ")), Code: protocol.ErrCodeAnswerInvalid, ID: id}
	}
	delete(f.pending, id)
	f.resolved[id] = protocol.ResolvedReason(reason)
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

func (f *fakeFleet) Prompts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.prompts)
}

// waitAnswer waits until want was recorded as an answer.
func (f *fakeFleet) waitAnswer(t *testing.T, want string) {
	t.Helper()
	f.waitFor(t, "answer", &f.answers, want)
}

// waitPrompt waits until want ("source: text") was recorded as a prompt.
// The server echoes a prompt before it hands it to the backend, so a client
// that saw the echo must still wait for this.
func (f *fakeFleet) waitPrompt(t *testing.T, want string) {
	t.Helper()
	f.waitFor(t, "prompt", &f.prompts, want)
}

func (f *fakeFleet) waitFor(t *testing.T, what string, list *[]string, want string) {
	t.Helper()
	var got []string
	if !testwait.Until(testwait.Bound, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		got = slices.Clone(*list)
		return slices.Contains(got, want)
	}) {
		t.Fatalf("%s %q never recorded; have %q", what, want, got)
	}
}

// testHome makes a short fleetHome (socket paths must fit ~100 bytes) and
// points AGENTS_FLEET_HOME and AGENTS_FLEET_REGISTRY_DIR at it.
func testHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "fl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	t.Setenv("AGENTS_FLEET_HOME", home)
	t.Setenv("AGENTS_FLEET_REGISTRY_DIR", testRegistryDir(home))
	return home
}

func testRegistryDir(home string) string { return home + "/sockets" }

type testFleet struct {
	*fakeFleet
	desc registry.Descriptor
	stop func()
}

// startFleet serves a fake fleet with a registered descriptor. suffix makes
// the id (<our pid>-<suffix>): lowercase letters and digits.
func startFleet(t *testing.T, home, name, suffix string) *testFleet {
	t.Helper()
	id := fmt.Sprintf("%d-%s", os.Getpid(), suffix)
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	token, err := registry.WriteToken(registry.TokenPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFleet{pending: map[string]*protocol.AskRequest{}, resolved: map[string]protocol.ResolvedReason{}, lost: map[string]bool{}}
	f.srv = controlsock.New(controlsock.Config{Token: token, Backend: f, Welcome: protocol.Welcome{SessionID: "s-" + suffix, Cwd: home}})
	ln, err := controlsock.Listen(registry.SocketPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { f.srv.Serve(ln); close(served) }()
	var once sync.Once
	tf := &testFleet{fakeFleet: f}
	tf.stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			f.srv.Shutdown(ctx)
			<-served
		})
	}
	t.Cleanup(tf.stop)
	tf.desc = registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: name, Cwd: home,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().Add(-90 * time.Minute).UnixMilli(), ProtocolVersion: registry.ProtocolVersion,
	}
	if _, err := registry.Write(testRegistryDir(home), tf.desc); err != nil {
		t.Fatal(err)
	}
	return tf
}

// writeStale registers a descriptor whose process is not running.
func writeStale(t *testing.T, home string) string {
	t.Helper()
	pid := 999_999_999
	for registry.PidAlive(pid) {
		pid--
	}
	id := fmt.Sprintf("%d-dead", pid)
	d := registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: id, PID: pid, Name: "stale", Cwd: home,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion,
	}
	if _, err := registry.Write(testRegistryDir(home), d); err != nil {
		t.Fatal(err)
	}
	return id
}

// cmdOutput is a concurrency-safe writer the test can wait on.
type cmdOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newCmdOutput() *cmdOutput { return &cmdOutput{} }

func (o *cmdOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *cmdOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *cmdOutput) waitFor(t *testing.T, s string) {
	t.Helper()
	if !testwait.Until(testwait.Bound, func() bool { return strings.Contains(o.String(), s) }) {
		t.Fatalf("output never contained %q:\n%s", s, o.String())
	}
}

// runningCmd is a command executing on its own goroutine.
type runningCmd struct {
	stdout, stderr *cmdOutput
	done           chan error
}

// startCmd runs cmd with args on a goroutine.
func startCmd(t *testing.T, cmd *cobra.Command, stdin io.Reader, args ...string) *runningCmd {
	t.Helper()
	r := &runningCmd{stdout: newCmdOutput(), stderr: newCmdOutput(), done: make(chan error, 1)}
	cmd.SetArgs(args)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd.SetIn(stdin)
	cmd.SetOut(r.stdout)
	cmd.SetErr(r.stderr)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		defer cancel()
		r.done <- cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s did not stop", cmd.Name())
		}
	})
	return r
}

func (r *runningCmd) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("command did not finish; stdout:\n%s\nstderr:\n%s", r.stdout.String(), r.stderr.String())
		return nil
	}
}

// runCmd runs cmd with args to completion.
func runCmd(t *testing.T, cmd *cobra.Command, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	r := startCmd(t, cmd, stdin, args...)
	err = r.wait(t)
	return r.stdout.String(), r.stderr.String(), err
}

func TestAttach(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	tf.confirm("confirm-1", "Deploy?")

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	r := startCmd(t, newAttachCmd(), pr, "alpha")
	typeLine := func(line string) {
		t.Helper()
		if _, err := io.WriteString(pw, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	r.stdout.waitFor(t, "· ? [confirm-1] Deploy? (/yes or /no)")
	r.stdout.waitFor(t, "── live ──")

	// The prompt is printed once: the REPL's own line, not the echo. The
	// fleet's reply comes after the echo, so the echo was handled by then.
	typeLine("hello fleet")
	r.stdout.waitFor(t, "fleet: echo: hello fleet")
	if n := strings.Count(r.stdout.String(), "hello fleet"); n != 2 { // "you: …" and the reply
		t.Errorf("prompt text printed %d times, want 2:\n%s", n, r.stdout.String())
	}
	tf.waitPrompt(t, "attach@"+testHostname(t)+": hello fleet")

	typeLine("/yes")
	tf.waitAnswer(t, "confirm-1=true")
	r.stdout.waitFor(t, "✓ confirm-1 answered (approved)")

	tf.ask("ask-1", "Which env?", "staging", "prod")
	r.stdout.waitFor(t, "? [ask-1] Which env? choices: 1) staging 2) prod")
	typeLine("/answer 2")
	tf.waitAnswer(t, "ask-1=prod")
	r.stdout.waitFor(t, "✓ ask-1 answered") // no longer pending for the REPL

	tf.ask("ask-2", "Which region?", "eu", "us")
	r.stdout.waitFor(t, "[ask-2]")
	typeLine("/answer 3")
	r.stdout.waitFor(t, `error: "3" is not one of the choices (eu, us)`)

	typeLine("/quit")
	if err := r.wait(t); err != nil {
		t.Fatalf("attach after /quit = %v", err)
	}
}

func TestAttachFleetGone(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	r := startCmd(t, newAttachCmd(), pr)
	r.stdout.waitFor(t, "attached") // printed once connected
	tf.stop()
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "closed the connection") {
		t.Fatalf("attach after the fleet stopped = %v, want an error", err)
	}
}

func TestAttachNoFleet(t *testing.T) {
	testHome(t)
	_, _, err := runCmd(t, newAttachCmd(), nil)
	if err == nil || !strings.Contains(err.Error(), "no running fleet") {
		t.Fatalf("attach with no fleet = %v", err)
	}
}

func testHostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname")
	}
	return h
}
