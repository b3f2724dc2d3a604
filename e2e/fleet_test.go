// Package e2e drives the built fleet binary the way a user does: a fleet
// started with `fleet run`, consoles attached through the registry, raw
// NDJSON through socat, signals for shutdown.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/cli"
	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

var fleetBin string

// The binary is built from cmd/fleet, which is package cli and what it
// imports. Importing cli here puts all of it into this test's build inputs,
// so `go test` does not reuse a cached result after the code changed.
var _ = cli.Version

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fleetBin = filepath.Join(dir, "fleet")
	build := exec.Command("go", "build", "-o", fleetBin, "../cmd/fleet")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fleet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTool fails under CI (which must install it) and skips elsewhere.
func requireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run must install it", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// env is an isolated fleet home and a working directory.
type env struct {
	t    testing.TB
	home string
	cwd  string
	// wrap, when set, runs the fleet binary (ip netns exec NS: in a
	// network namespace).
	wrap []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// Short: the socket path must fit sun_path.
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if raceEnabled {
		// Race-instrumented consoles, with other packages' race tests
		// running beside them, can go unscheduled for longer than the
		// default stall grace (200 ms), and the fleet then rightly treats
		// a healthy console as stalled. Tests that write their own
		// config.json replace this (crowd adds it back).
		os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"limits": {"stallGraceMs": 5000}}`), 0o600)
	}
	return &env{t: t, home: home, cwd: t.TempDir()}
}

func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AGENTS_FLEET_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "AGENTS_FLEET_HOME="+e.home)
}

// command is the fleet binary with args in e (run by e.wrap when set).
func (e *env) command(ctx context.Context, args ...string) *exec.Cmd {
	argv := append(append(slices.Clone(e.wrap), fleetBin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.cwd
	cmd.Env = e.environ()
	return cmd
}

// fleet runs the binary to completion.
func (e *env) fleet(stdin string, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err := cmd.Run()
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("fleet %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return o.String(), s.String(), code
}

// daemon is a running `fleet run` (or another long-running command: spawn).
type daemon struct {
	t      testing.TB
	cmd    *exec.Cmd
	stderr *syncBuffer
	desc   registry.Descriptor
	done   chan struct{} // closed when the process has exited
	err    error         // its exit error, set before done closes
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// start runs `fleet run --headless args...` and waits for its descriptor.
func (e *env) start(args ...string) *daemon {
	e.t.Helper()
	d := e.spawn(append([]string{"run", "--headless"}, args...)...)
	e.waitRegistered(d)
	return d
}

// spawn starts the binary with args; it is killed, if still running, when
// the test ends.
func (e *env) spawn(args ...string) *daemon {
	e.t.Helper()
	cmd := e.command(context.Background(), args...)
	d := &daemon{t: e.t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			cmd.Process.Kill()
			<-d.done
		}
	})
	return d
}

// waitRegistered waits for the descriptor of d's process (which the test
// started itself) to appear in e's registry, and records it in d.desc.
func (e *env) waitRegistered(d *daemon) {
	e.t.Helper()
	regDir := filepath.Join(e.home, "sockets")
	if !testwait.Until(testwait.Bound, func() bool {
		entries, _ := registry.Live(regDir)
		for _, en := range entries {
			if en.PID == d.cmd.Process.Pid {
				d.desc = en.Descriptor
				return true
			}
		}
		select {
		case <-d.done:
			e.t.Fatalf("fleet exited before registering: %v\n%s", d.err, d.stderr)
		default:
		}
		return false
	}) {
		e.t.Fatalf("no descriptor after %v\n%s", testwait.Bound, d.stderr)
	}
}

// waitAttached waits until the fleet logged that a client called name
// attached: what it broadcasts from then on reaches that client live.
func (d *daemon) waitAttached(name string) {
	d.t.Helper()
	if !testwait.Until(time.Minute, func() bool {
		for _, l := range strings.Split(d.stderr.String(), "\n") {
			if strings.Contains(l, `msg="client attached"`) && strings.Contains(l, " name="+name+" ") {
				return true
			}
		}
		return false
	}) {
		d.t.Fatalf("no client %q attached within a minute:\n%s", name, d.stderr)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if d.err != nil {
			d.t.Fatalf("fleet exited with %v\n%s", d.err, d.stderr)
		}
	case <-time.After(20 * time.Second):
		d.t.Fatalf("fleet did not stop\n%s", d.stderr)
	}
}

func (d *daemon) dial(kind protocol.ClientKind, name string) *client.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.desc, client.Options{ClientKind: kind, ClientName: name})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// stream reads a connection on its own goroutine so tests can wait for
// frames with a deadline.
type stream struct {
	t      *testing.T
	frames chan frame
}

type frame struct {
	m      protocol.Message
	replay bool
}

func watch(t *testing.T, c *client.Conn) *stream {
	s := &stream{t: t, frames: make(chan frame, 100000)}
	go func() {
		defer close(s.frames)
		for {
			m, _, replay, err := c.Next()
			if err != nil {
				if _, ok := err.(*client.FrameError); ok {
					continue
				}
				return
			}
			s.frames <- frame{m, replay}
		}
	}()
	return s
}

// waitFor returns the first frame matching pred, failing after 15 s.
func (s *stream) waitFor(what string, pred func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	return s.waitWithin(15*time.Second, what, pred)
}

// waitWithin reads frames until one matches pred and returns it, failing
// when the connection closes or bound passes first. The frames it read
// before are consumed.
func (s *stream) waitWithin(bound time.Duration, what string, pred func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				s.t.Fatalf("connection closed while waiting for %s", what)
			}
			if pred(f.m) {
				return f.m
			}
		case <-timeout:
			s.t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
	}
}

func isType(typ string) func(protocol.Message) bool {
	return func(m protocol.Message) bool { return m.MessageType() == typ }
}

func TestAskAnsweredBySecondClientWhileThirdWatches(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket", "--name", "tour")
	if d.desc.Name != "tour" || d.desc.HubAttach || d.desc.Cwd != e.cwd {
		t.Fatalf("descriptor %+v", d.desc)
	}
	alice, bob, carol := d.dial(protocol.ClientREPL, "alice"), d.dial(protocol.ClientBot, "bob"), d.dial(protocol.ClientOther, "carol")
	if w := alice.Welcome(); w.SessionName != "tour" || w.Cwd != e.cwd || len(w.Capabilities) != 3 {
		t.Fatalf("welcome %+v", w)
	}
	as, bs, cs := watch(t, alice), watch(t, bob), watch(t, carol)
	for _, s := range []*stream{as, bs, cs} {
		s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	}
	reqID, err := alice.Prompt(`$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "deploying to $env"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*stream{as, bs, cs} {
		um := s.waitFor("userMessage", isType(protocol.TypeUserMessage)).(*protocol.UserMessage)
		if um.RequestID != reqID || um.Source != "alice" {
			t.Fatalf("echo %+v", um)
		}
	}
	ask := bs.waitFor("askRequest", isType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	if err := bob.Answer(ask.ID, "qa"); err != nil {
		t.Fatal(err)
	}
	if msg := bs.waitFor("error", isType(protocol.TypeError)).(*protocol.Error).Message; !strings.Contains(msg, "one of") {
		t.Fatal(msg)
	}
	if err := bob.Answer(ask.ID, "prod"); err != nil {
		t.Fatal(err)
	}
	res := cs.waitFor("confirmResolved", isType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != ask.ID || res.Kind != protocol.KindAsk || res.Reason != protocol.ReasonAnswered || !res.Approved {
		t.Fatalf("resolved %+v", res)
	}
	cs.waitFor("transcript", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "deploying to prod"
	})
	cs.waitFor("completed", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "completed"
	})

	// A late console gets the history in the documented order.
	dave := d.dial(protocol.ClientREPL, "dave")
	ds := watch(t, dave)
	var order []string
	var hyd *protocol.Hydrate
	for {
		f := <-ds.frames
		if !f.replay {
			t.Fatalf("live frame %s inside replay", f.m.MessageType())
		}
		order = append(order, f.m.MessageType())
		if h, ok := f.m.(*protocol.Hydrate); ok {
			hyd = h
		}
		if f.m.MessageType() == protocol.TypeReplayEnd {
			break
		}
	}
	if got := strings.Join(order, " "); got != "commandCatalog fleetIntel fleetEvolution fleetStore fleetExperiment hydrate fleetState replayEnd" {
		t.Fatalf("replay order %q", got)
	}
	found := false
	for _, tl := range hyd.Transcripts {
		found = found || tl.Text == "deploying to prod"
	}
	if !found || len(hyd.Conversation) < 2 || len(hyd.Hub) < 4 {
		t.Fatalf("hydrate %+v", hyd)
	}
	d.stop()
}

func TestShutdownCancelsRequestsAndRemovesFiles(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket")
	c := d.dial(protocol.ClientREPL, "watcher")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	if _, err := c.Prompt(`$ echo '::confirm::Ship it?'; read ok; sleep 60`); err != nil {
		t.Fatal(err)
	}
	req := s.waitFor("confirmRequest", isType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	// Ctrl-C under `go run` arrives twice (the terminal's and go run's relay):
	// the second must not cut the clean shutdown short.
	d.cmd.Process.Signal(os.Interrupt)
	d.stop()
	res := s.waitFor("cancelled", isType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != req.ID || res.Reason != protocol.ReasonCancelled || res.Approved {
		t.Fatalf("%+v", res)
	}
	for _, p := range []string{d.desc.SocketPath, d.desc.TokenPath, filepath.Join(e.home, "sockets", d.desc.ID+".json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

func TestSocatSpeaksTheProtocol(t *testing.T) {
	requireTool(t, "socat")
	e := newEnv(t)
	d := e.start("--control-socket")
	token, err := registry.ReadToken(d.desc.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "socat", "-t", "2", "-", "UNIX-CONNECT:"+d.desc.SocketPath)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(in, `{"type":"hello","token":%q,"clientKind":"other","clientName":"socat"}`+"\n", token)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var types []string
	next := func() string {
		if !sc.Scan() {
			t.Fatalf("socat output ended after %v: %v", types, sc.Err())
		}
		typ, err := protocol.PeekType(sc.Bytes())
		if err != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		types = append(types, typ)
		return typ
	}
	for next() != protocol.TypeReplayEnd {
	}
	if types[0] != protocol.TypeWelcome {
		t.Fatalf("first frame %s", types[0])
	}
	fmt.Fprintln(in, `{"type":"ping"}`)
	fmt.Fprintln(in, `{"type":"prompt","text":"$ echo from-socat","requestId":"s-1"}`)
	want := map[string]bool{"pong": false, "userMessage": false, "transcript": false}
	for !want["pong"] || !want["userMessage"] || !want["transcript"] {
		typ := next()
		if _, ok := want[typ]; ok {
			want[typ] = true
		}
	}
	in.Close()
	io.Copy(io.Discard, out)
	cmd.Wait()
	d.stop()
}

func TestCommandLineClients(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket", "--hub")
	if !d.desc.HubAttach {
		t.Fatal("--hub did not set hubAttach")
	}
	raw, _ := os.ReadFile(filepath.Join(e.home, "sockets", d.desc.ID+".json"))
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil || fields["hubAttach"] != true {
		t.Fatalf("descriptor %s", raw)
	}
	out, errOut, code := e.fleet("", "ls", "--json")
	if code != 0 || !strings.Contains(out, d.desc.ID) {
		t.Fatalf("ls: %d %s %s", code, out, errOut)
	}
	// events --live --type transcript --count 1, then send a task.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := exec.CommandContext(ctx, fleetBin, "events", "--live", "--type", "transcript", "--count", "1")
	ev.Env = e.environ()
	var evOut syncBuffer
	ev.Stdout = &evOut
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	// --live skips the replay: the task must print after events attached.
	d.waitAttached("events")
	if out, errOut, code := e.fleet("", "send", "$ echo via-send"); code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errOut)
	}
	if err := ev.Wait(); err != nil {
		t.Fatalf("events: %v", err)
	}
	var tr map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(evOut.String())), &tr); err != nil || tr["text"] != "via-send" {
		t.Fatalf("events printed %q", evOut.String())
	}
	// send surfaces the server's error.
	if _, errOut, code := e.fleet("", "send", "nope-fleet", "hi"); code == 0 || !strings.Contains(errOut, "nope-fleet") {
		t.Fatalf("send to unknown fleet: %d %s", code, errOut)
	}
	d.stop()
	if out, _, _ := e.fleet("", "ls"); !strings.Contains(out, "no fleets running") {
		t.Fatalf("ls after stop: %q", out)
	}
}

func TestStartupErrors(t *testing.T) {
	e := newEnv(t)
	long := filepath.Join(e.home, strings.Repeat("h", 100))
	os.MkdirAll(long, 0o700)
	e2 := &env{t: t, home: long, cwd: e.cwd}
	_, errOut, code := e2.fleet("", "run", "--headless", "--control-socket")
	if code == 0 || !strings.Contains(errOut, "limit of 107 bytes") || !strings.Contains(errOut, "AGENTS_FLEET_HOME") {
		t.Fatalf("long socket path: %d %q", code, errOut)
	}
	os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"controlSocket": "yes"}`), 0o600)
	_, errOut, code = e.fleet("", "run", "--headless")
	if code == 0 || !strings.Contains(errOut, "config.json") || !strings.Contains(errOut, "controlSocket") {
		t.Fatalf("bad config: %d %q", code, errOut)
	}
	os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"controlSocket": true,`), 0o600)
	_, errOut, code = e.fleet("", "run", "--headless")
	if code == 0 || !strings.Contains(errOut, "line 1") {
		t.Fatalf("syntax error: %d %q", code, errOut)
	}
	os.Remove(filepath.Join(e.home, "config.json"))
	if _, errOut, code := e.fleet("", "run", "--headless", "--workers", "0"); code == 0 || !strings.Contains(errOut, "workers") {
		t.Fatalf("--workers 0: %d %q", code, errOut)
	}
	if _, errOut, code := e.fleet("", "run", "--headless", "--provider", "bogus"); code == 0 || !strings.Contains(errOut, "local, claude, codex, copilot") {
		t.Fatalf("--provider bogus: %d %q", code, errOut)
	}
	// A missing CLI names the npm package and the config key.
	os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"providers": {"claude": {"path": "/nonexistent/claude"}}}`), 0o600)
	if _, errOut, code := e.fleet("", "run", "--headless", "--provider", "claude"); code == 0 ||
		!strings.Contains(errOut, "@anthropic-ai/claude-code") || !strings.Contains(errOut, "providers.claude.path") {
		t.Fatalf("--provider claude without the CLI: %d %q", code, errOut)
	}
	os.Remove(filepath.Join(e.home, "config.json"))
}

// A console that stops reading while a task floods output is evicted; a
// healthy console gets every line in order and the daemon's memory stays
// bounded.
func TestStalledConsoleDuringFlood(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket")
	token, err := registry.ReadToken(d.desc.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	// The stalled console: a raw connection that says hello and never reads.
	stalled, err := net.Dial("unix", d.desc.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, `{"type":"hello","token":%q,"clientKind":"other","clientName":"stalled"}`+"\n", token)

	healthy := d.dial(protocol.ClientOther, "healthy")
	for {
		m, _, _, err := healthy.Next()
		if err != nil {
			t.Fatal(err)
		}
		if m.MessageType() == protocol.TypeReplayEnd {
			break
		}
	}
	base := vmKiB(d, "VmRSS:") // the daemon's own size, before the flood
	const lines = 200000       // ~54 MB of frames: over six times the 8 MiB bound
	if _, err := healthy.Prompt(fmt.Sprintf(`$ seq 1 %d | sed 's/$/ ........................................................................................................................................................................../'`, lines)); err != nil {
		t.Fatal(err)
	}
	next := 1
	deadline := time.Now().Add(60 * time.Second)
	for next <= lines && time.Now().Before(deadline) {
		m, _, _, err := healthy.Next()
		if err != nil {
			t.Fatalf("healthy console lost after %d lines: %v", next-1, err)
		}
		tr, ok := m.(*protocol.Transcript)
		if !ok || tr.Agent == "" || tr.Role != protocol.RoleTool {
			continue
		}
		num, _, _ := strings.Cut(tr.Text, " ")
		if num != fmt.Sprint(next) {
			t.Fatalf("line %d: got %q", next, tr.Text[:min(len(tr.Text), 20)])
		}
		next++
	}
	if next <= lines {
		t.Fatalf("healthy console got %d of %d lines", next-1, lines)
	}
	if !strings.Contains(d.stderr.String(), "slow consumer evicted") {
		t.Fatalf("stalled console not evicted:\n%s", d.stderr)
	}
	// What the flood added is bounded by the queue bounds (8 MiB each), not
	// by the 54 MB flood; the daemon's own size (its binary's mapped pages
	// among it) is not the flood's.
	if hwm := vmKiB(d, "VmHWM:"); base > 0 && hwm > 0 {
		if hwm-base > 48<<10 {
			t.Fatalf("daemon peak RSS %d KiB, %d KiB over its %d KiB before the flood", hwm, hwm-base, base)
		}
		t.Logf("daemon peak RSS %d KiB, %d KiB over its size before the flood", hwm, hwm-base)
	}
	d.stop()
}

// vmKiB is the field (VmRSS:, VmHWM:) of d's /proc status, in KiB; 0 when
// unreadable.
func vmKiB(d *daemon, field string) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	var kib int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			fmt.Sscan(v, &kib)
		}
	}
	return kib
}

func TestConfiguredLimits(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.home, "config.json"), []byte(`{"limits": {"maxClients": 2, "helloTimeoutMs": 300}}`), 0o600)
	d := e.start("--control-socket")
	d.dial(protocol.ClientOther, "one")
	d.dial(protocol.ClientOther, "two")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, d.desc, client.Options{ClientKind: protocol.ClientOther}); err == nil || !strings.Contains(err.Error(), "too many clients") {
		t.Fatalf("third client: %v", err)
	}
	// A connection that never says hello is cut after helloTimeoutMs. The
	// reply names the configured timeout; when it comes depends on the
	// machine's load, but never before the timeout (start is taken before
	// the dial, so before the fleet's timer starts).
	start := time.Now()
	c, err := net.Dial("unix", d.desc.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "no hello within 300ms") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("hello timeout: %q after %s", line, time.Since(start))
	}
	d.stop()
}
