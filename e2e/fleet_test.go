// Package e2e drives the built fleet binary the way a user does: a fleet
// started with `fleet run`, consoles attached through the registry, raw
// NDJSON through socat, signals for shutdown.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// TestMain builds the fleet binary the tests drive.
func TestMain(m *testing.M) { e2etest.Main(m) }

func TestAskAnsweredBySecondClientWhileThirdWatches(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--name", "tour")
	if d.Desc.Name != "tour" || d.Desc.HubAttach || d.Desc.Cwd != e.Dir {
		t.Fatalf("descriptor %+v", d.Desc)
	}
	alice, bob, carol := d.Dial(protocol.ClientREPL, "alice"), d.Dial(protocol.ClientBot, "bob"), d.Dial(protocol.ClientOther, "carol")
	if w := alice.Welcome(); w.SessionName != "tour" || w.Cwd != e.Dir || len(w.Capabilities) != 3 {
		t.Fatalf("welcome %+v", w)
	}
	as, bs, cs := e2etest.Watch(t, alice), e2etest.Watch(t, bob), e2etest.Watch(t, carol)
	for _, s := range []*e2etest.Stream{as, bs, cs} {
		s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	}
	reqID, err := alice.Prompt(`$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "deploying to $env"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*e2etest.Stream{as, bs, cs} {
		um := s.WaitFor("userMessage", e2etest.IsType(protocol.TypeUserMessage)).(*protocol.UserMessage)
		if um.RequestID != reqID || um.Source != "alice" {
			t.Fatalf("echo %+v", um)
		}
	}
	ask := bs.WaitFor("askRequest", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	if err := bob.Answer(ask.ID, "qa"); err != nil {
		t.Fatal(err)
	}
	if msg := bs.WaitFor("error", e2etest.IsType(protocol.TypeError)).(*protocol.Error).Message; !strings.Contains(msg, "one of") {
		t.Fatal(msg)
	}
	if err := bob.Answer(ask.ID, "prod"); err != nil {
		t.Fatal(err)
	}
	res := cs.WaitFor("confirmResolved", e2etest.IsType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != ask.ID || res.Kind != protocol.KindAsk || res.Reason != protocol.ReasonAnswered || !res.Approved {
		t.Fatalf("resolved %+v", res)
	}
	cs.WaitFor("transcript", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "deploying to prod"
	})
	cs.WaitFor("completed", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "completed"
	})

	// A late console gets the history in the documented order.
	dave := d.Dial(protocol.ClientREPL, "dave")
	ds := e2etest.Watch(t, dave)
	var order []string
	var hyd *protocol.Hydrate
	for {
		f := <-ds.Frames
		if !f.Replay {
			t.Fatalf("live frame %s inside replay", f.Msg.MessageType())
		}
		order = append(order, f.Msg.MessageType())
		if h, ok := f.Msg.(*protocol.Hydrate); ok {
			hyd = h
		}
		if f.Msg.MessageType() == protocol.TypeReplayEnd {
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
	d.Stop()
}

func TestShutdownCancelsRequestsAndRemovesFiles(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientREPL, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt(`$ echo '::confirm::Ship it?'; read ok; sleep 60`); err != nil {
		t.Fatal(err)
	}
	req := s.WaitFor("confirmRequest", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	// Ctrl-C under `go run` arrives twice (the terminal's and go run's relay):
	// the second must not cut the clean shutdown short.
	d.Cmd.Process.Signal(os.Interrupt)
	d.Stop()
	res := s.WaitFor("cancelled", e2etest.IsType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != req.ID || res.Reason != protocol.ReasonCancelled || res.Approved {
		t.Fatalf("%+v", res)
	}
	for _, p := range []string{d.Desc.SocketPath, d.Desc.TokenPath, filepath.Join(e.Home, "sockets", d.Desc.ID+".json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

func TestSocatSpeaksTheProtocol(t *testing.T) {
	e2etest.RequireTool(t, "socat")
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	token, err := registry.ReadToken(d.Desc.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "socat", "-t", "2", "-", "UNIX-CONNECT:"+d.Desc.SocketPath)
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
	d.Stop()
}

func TestCommandLineClients(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--hub")
	if !d.Desc.HubAttach {
		t.Fatal("--hub did not set hubAttach")
	}
	raw, _ := os.ReadFile(filepath.Join(e.Home, "sockets", d.Desc.ID+".json"))
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil || fields["hubAttach"] != true {
		t.Fatalf("descriptor %s", raw)
	}
	out, errOut, code := e.Fleet("", "ls", "--json")
	if code != 0 || !strings.Contains(out, d.Desc.ID) {
		t.Fatalf("ls: %d %s %s", code, out, errOut)
	}
	// events --live --type transcript --count 1, then send a task.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := exec.CommandContext(ctx, e2etest.Bin(), "events", "--live", "--type", "transcript", "--count", "1")
	ev.Env = e.Environ()
	var evOut e2etest.Buffer
	ev.Stdout = &evOut
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	// --live skips the replay: the task must print after events attached.
	d.WaitAttached("events")
	if out, errOut, code := e.Fleet("", "send", "$ echo via-send"); code != 0 {
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
	if _, errOut, code := e.Fleet("", "send", "nope-fleet", "hi"); code == 0 || !strings.Contains(errOut, "nope-fleet") {
		t.Fatalf("send to unknown fleet: %d %s", code, errOut)
	}
	d.Stop()
	if out, _, _ := e.Fleet("", "ls"); !strings.Contains(out, "no fleets running") {
		t.Fatalf("ls after stop: %q", out)
	}
}

func TestStartupErrors(t *testing.T) {
	e := e2etest.NewEnv(t)
	long := filepath.Join(e.Home, strings.Repeat("h", 100))
	os.MkdirAll(long, 0o700)
	e2 := &e2etest.Env{T: t, Home: long, Dir: e.Dir}
	_, errOut, code := e2.Fleet("", "run", "--headless", "--control-socket")
	if code == 0 || !strings.Contains(errOut, "limit of 107 bytes") || !strings.Contains(errOut, "AGENTS_FLEET_HOME") {
		t.Fatalf("long socket path: %d %q", code, errOut)
	}
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"controlSocket": "yes"}`), 0o600)
	_, errOut, code = e.Fleet("", "run", "--headless")
	if code == 0 || !strings.Contains(errOut, "config.json") || !strings.Contains(errOut, "controlSocket") {
		t.Fatalf("bad config: %d %q", code, errOut)
	}
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"controlSocket": true,`), 0o600)
	_, errOut, code = e.Fleet("", "run", "--headless")
	if code == 0 || !strings.Contains(errOut, "line 1") {
		t.Fatalf("syntax error: %d %q", code, errOut)
	}
	os.Remove(filepath.Join(e.Home, "config.json"))
	if _, errOut, code := e.Fleet("", "run", "--headless", "--workers", "0"); code == 0 || !strings.Contains(errOut, "workers") {
		t.Fatalf("--workers 0: %d %q", code, errOut)
	}
	if _, errOut, code := e.Fleet("", "run", "--headless", "--provider", "bogus"); code == 0 || !strings.Contains(errOut, "local, claude, codex, copilot") {
		t.Fatalf("--provider bogus: %d %q", code, errOut)
	}
	// A missing CLI names the npm package and the config key.
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"providers": {"claude": {"path": "/nonexistent/claude"}}}`), 0o600)
	if _, errOut, code := e.Fleet("", "run", "--headless", "--provider", "claude"); code == 0 ||
		!strings.Contains(errOut, "@anthropic-ai/claude-code") || !strings.Contains(errOut, "providers.claude.path") {
		t.Fatalf("--provider claude without the CLI: %d %q", code, errOut)
	}
	os.Remove(filepath.Join(e.Home, "config.json"))
}

// A console that stops reading while a task floods output is evicted; a
// healthy console gets every line in order and the daemon's memory stays
// bounded.
func TestStalledConsoleDuringFlood(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	token, err := registry.ReadToken(d.Desc.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	// The stalled console: a raw connection that says hello and never reads.
	stalled, err := net.Dial("unix", d.Desc.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, `{"type":"hello","token":%q,"clientKind":"other","clientName":"stalled"}`+"\n", token)

	healthy := d.Dial(protocol.ClientOther, "healthy")
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
	if !strings.Contains(d.Stderr.String(), "slow consumer evicted") {
		t.Fatalf("stalled console not evicted:\n%s", d.Stderr)
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
	d.Stop()
}

// vmKiB is the field (VmRSS:, VmHWM:) of d's /proc status, in KiB; 0 when
// unreadable.
func vmKiB(d *e2etest.Daemon, field string) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Cmd.Process.Pid))
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
	e := e2etest.NewEnv(t)
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"limits": {"maxClients": 2, "helloTimeoutMs": 300}}`), 0o600)
	d := e.Start("--control-socket")
	d.Dial(protocol.ClientOther, "one")
	d.Dial(protocol.ClientOther, "two")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, d.Desc, client.Options{ClientKind: protocol.ClientOther}); err == nil || !strings.Contains(err.Error(), "too many clients") {
		t.Fatalf("third client: %v", err)
	}
	// A connection that never says hello is cut after helloTimeoutMs. The
	// reply names the configured timeout; when it comes depends on the
	// machine's load, but never before the timeout (start is taken before
	// the dial, so before the fleet's timer starts).
	start := time.Now()
	c, err := net.Dial("unix", d.Desc.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.Contains(line, "no hello within 300ms") || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("hello timeout: %q after %s", line, time.Since(start))
	}
	d.Stop()
}
