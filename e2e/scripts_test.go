package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// This file drives what a script does with the fleet binary: list and
// answer the requests a fleet waits for, tell a failed command from a good
// one by the exit status, and what a careless command line gets back.

// expectExit runs the binary and checks its exit status and that stderr
// (or stdout, for exit 0) contains want.
func expectExit(e *e2etest.Env, code int, want string, args ...string) (stdout, stderr string) {
	e.T.Helper()
	stdout, stderr, got := e.Fleet("", args...)
	out := stderr
	if code == 0 {
		out = stdout
	}
	if got != code || !strings.Contains(out, want) {
		e.T.Fatalf("fleet %s: exit %d\nstdout: %s\nstderr: %s\nwant exit %d with %q", strings.Join(args, " "), got, stdout, stderr, code, want)
	}
	return stdout, stderr
}

func TestPendingAndAnswerExitCodes(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientOther, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))

	expectExit(e, 0, "no requests waiting", "pending")
	if out, _ := expectExit(e, 0, "[]", "pending", "--json"); out != "[]\n" {
		t.Fatalf("pending --json with nothing waiting: %q", out)
	}

	if _, err := c.Prompt(`$ echo '::ask::{"question":"Which env?","choices":["staging",{"label":"Production","value":"prod"}]}'; read env; echo "env=$env"`); err != nil {
		t.Fatal(err)
	}
	ask := s.WaitFor("askRequest", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	if _, err := c.Prompt(`$ echo '::confirm::Push to origin?'; read ok; echo "ok=$ok"`); err != nil {
		t.Fatal(err)
	}
	confirm := s.WaitFor("confirmRequest", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)

	// pending: the requests as the fleet replays them.
	out, _ := expectExit(e, 0, ask.ID, "pending", "--json")
	var frames []json.RawMessage
	if err := json.Unmarshal([]byte(out), &frames); err != nil || len(frames) != 2 {
		t.Fatalf("pending --json: %v\n%s", err, out)
	}
	for i, want := range []protocol.Message{ask, confirm} {
		m, err := protocol.Decode(frames[i])
		if err != nil || m.MessageType() != want.MessageType() {
			t.Fatalf("frame %d: %s (%v), want a %s", i, frames[i], err, want.MessageType())
		}
	}
	if got := frames[0]; !strings.Contains(string(got), `"id":"`+ask.ID+`"`) || !strings.Contains(string(got), `"value":"prod"`) {
		t.Fatalf("ask frame %s", got)
	}
	out, _ = expectExit(e, 0, confirm.ID, "pending", d.Desc.Name)
	for _, want := range []string{ask.ID + "  ask", "  Which env?\n  1) staging\n  2) Production [prod]\n", confirm.ID + "  confirm", "  Push to origin?\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pending lacks %q:\n%s", want, out)
		}
	}

	// answer: refused locally (2), taken (0), too late (1), unknown (2).
	expectExit(e, 2, "1) staging, 2) Production [prod]", "answer", ask.ID, "dev")
	expectExit(e, 2, "answer yes or no", "answer", confirm.ID, "maybe")
	expectExit(e, 0, ask.ID+" answered: prod\n", "answer", ask.ID, "2")
	s.WaitFor("the task read the answer", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "env=prod"
	})
	expectExit(e, 1, "was already resolved: answered from a console", "answer", ask.ID, "1")
	expectExit(e, 0, confirm.ID+" denied\n", "answer", d.Desc.ID, confirm.ID, "No")
	s.WaitFor("the task read no", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "ok=no"
	})
	expectExit(e, 1, "was already resolved", "answer", confirm.ID, "yes")
	expectExit(e, 2, "no request ask-nope-1", "answer", "ask-nope-1", "x")
	expectExit(e, 0, "no requests waiting", "pending")
	d.Stop()
}

// A request that expired, or that another console answered first, is not
// answered by fleet answer: exit 1 with the reason.
func TestAnswerTooLate(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--request-ttl", "300ms")
	c := d.Dial(protocol.ClientOther, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt(`$ echo '::confirm::Deploy?'; read ok; echo "ok=$ok"`); err != nil {
		t.Fatal(err)
	}
	req := s.WaitFor("confirmRequest", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	res := s.WaitFor("expiry", e2etest.IsType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != req.ID || res.Reason != protocol.ReasonExpired {
		t.Fatalf("resolved %+v", res)
	}
	expectExit(e, 1, req.ID+" was already resolved: expired", "answer", req.ID, "yes")
	d.Stop()
}

func TestSendWaitReplyExitsOneOnAnErrorReply(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	_, stderr := expectExit(e, 1, `no worker "w9"`, "send", "--wait-reply", "/tell w9 hello")
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr: %q", stderr)
	}
	expectExit(e, 1, "(/answer is a console command: use `fleet answer ID ANSWER`)", "send", "--wait-reply", "/answer ask-1 1")
	expectExit(e, 1, `No task, worker or loop "t9"`, "send", "--wait-reply", "/cancel t9")
	expectExit(e, 1, "Unknown command /nope", "send", "--wait-reply", "/nope")
	expectExit(e, 0, "No tasks yet", "send", "--wait-reply", "/tasks")
	expectExit(e, 0, "Queued t1", "send", "--wait-reply", "$ true")
	d.Stop()
}

// Two fleets started in one folder: the second takes a numbered name and
// says so; a name given with --name that another fleet has is refused.
func TestTwoFleetsInOneFolderGetDistinctNames(t *testing.T) {
	e := e2etest.NewEnv(t)
	base := filepath.Base(e.Dir)
	first := e.Start("--control-socket")
	second := e.Start("--control-socket")
	if first.Desc.Name != base || second.Desc.Name != base+"-2" {
		t.Fatalf("names %q and %q, want %q and %q", first.Desc.Name, second.Desc.Name, base, base+"-2")
	}
	want := fmt.Sprintf("fleet: another fleet %q runs in this folder; this one is %q\n", base, base+"-2")
	if !strings.Contains(second.Stderr.String(), want) {
		t.Fatalf("the second fleet's stderr lacks %q:\n%s", want, second.Stderr)
	}
	// Each name selects its fleet.
	out, _ := expectExit(e, 0, base+"-2", "ls")
	if strings.Count(out, "\n") != 3 {
		t.Fatalf("ls:\n%s", out)
	}
	expectExit(e, 0, "No tasks yet", "send", "--wait-reply", base+"-2", "/tasks")
	_, stderr, code := e.Fleet("", "run", "--headless", "--control-socket", "--name", base)
	if code == 0 || !strings.Contains(stderr, fmt.Sprintf("--name %q: another fleet %q runs in this folder, id %s; choose another name", base, base, first.Desc.ID)) {
		t.Fatalf("a taken --name: exit %d, %q", code, stderr)
	}
	second.Stop()
	first.Stop()
}

func TestConfigTypoRefusedAtStart(t *testing.T) {
	e := e2etest.NewEnv(t)
	path := filepath.Join(e.Home, "config.json")
	os.WriteFile(path, []byte(`{"wrokers": 3, "providers": {"claude": {"pth": "/x"}}}`), 0o600)
	want := path + `: unknown key "providers.claude.pth" (did you mean "providers.claude.path"?); unknown key "wrokers" (did you mean "workers"?)`
	for _, args := range [][]string{
		{"run", "--headless", "--control-socket"},
		{"console"},
		{"intel", "prune"},
	} {
		_, stderr, code := e.Fleet("", args...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("fleet %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(args, " "), code, stderr, want)
		}
	}
	out, _, code := e.Fleet("", "doctor")
	if code != 1 || !strings.Contains(strings.Join(strings.Fields(out), " "), `unknown key "wrokers" (did you mean "workers"?)`) {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
}

func TestCarelessCommandLines(t *testing.T) {
	e := e2etest.NewEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--worker", "3"}, "fleet run: unknown flag --worker (did you mean --workers?)\nusage: fleet run [PROMPT] [flags]\n"},
		{[]string{"run", "--workers", "two"}, "fleet run: --workers wants a number, got \"two\"\nusage: fleet run [PROMPT] [flags]\n"},
		{[]string{"send", "--timeout", "soon", "x"}, "fleet send: --timeout wants a duration such as 30s, 5m or 1h30m, got \"soon\"\n"},
		{[]string{"send"}, "fleet send: missing TEXT\nusage: fleet send [FLEET] TEXT [flags]\n"},
		{[]string{"answer", "ask-1"}, "fleet answer: missing ANSWER\nusage: fleet answer [FLEET] ID ANSWER [flags]\n"},
		{[]string{"diff"}, "fleet diff: missing WORKER\n"},
		{[]string{"attahc"}, "fleet: unknown command \"attahc\" (did you mean \"attach\"?)\n"},
	} {
		stdout, stderr, code := e.Fleet("", tt.args...)
		if code != 2 || stdout != "" || stderr != tt.want && !strings.HasPrefix(stderr, tt.want) {
			t.Errorf("fleet %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
		}
	}
}

// The README's `fleet events --type hubEvent --count 5` on a fleet with
// history: the hub events it replays count, so it ends at once.
func TestEventsCountsReplayedHubEvents(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientOther, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ true\n$ echo two"); err != nil {
		t.Fatal(err)
	}
	done := 0
	s.WaitFor("both tasks done", func(m protocol.Message) bool {
		if h, ok := m.(*protocol.HubEvent); ok && h.Kind == "completed" {
			done++
		}
		return done == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.Bin(), "events", "--type", "hubEvent", "--count", "5")
	cmd.Env = e.Environ()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("events --type hubEvent --count 5 on a fleet with history: %v (%s)", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var ev struct{ Type, Text string }
		if json.Unmarshal([]byte(l), &ev) != nil || ev.Type != "hubEvent" || ev.Text == "" {
			t.Fatalf("not a hubEvent with a text: %s", l)
		}
	}
	d.Stop()
}

// Ctrl-C in fleet attach is a detach: it says so and exits 0, and the
// fleet runs on.
func TestAttachCtrlCDetaches(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2etest.Bin(), "attach")
	cmd.Env = e.Environ()
	stdin, _ := cmd.StdinPipe() // kept open: the console waits for input
	defer stdin.Close()
	stdout, _ := cmd.StdoutPipe()
	var stderr e2etest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	live := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), "── live ──") {
				found = true
				live <- true
			}
		}
		if !found {
			live <- false
		}
	}()
	select {
	case ok := <-live:
		if !ok {
			t.Fatalf("attach ended before going live: %s", stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("attach never went live")
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err != nil || stderr.String() != "detached; the fleet keeps running\n" {
		t.Fatalf("attach after Ctrl-C: %v, stderr %q", err, stderr.String())
	}
	expectExit(e, 0, "No tasks yet", "send", "--wait-reply", "/tasks")
	d.Stop()
}

// The README's Python client (for machines without socat) works as
// written: the block is read from the README and run against a fleet.
func TestReadmePythonClient(t *testing.T) {
	e2etest.RequireTool(t, "python3")
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "python3 - \"$sock\" \"$token\" <<'EOF' | jq -c '{type, text}'\n")
	if !ok {
		t.Fatal("the README has no Python client block")
	}
	script, _, ok := strings.Cut(block, "\nEOF\n")
	if !ok {
		t.Fatal("the README's Python block has no end")
	}
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	token, err := registry.ReadToken(d.Desc.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-", d.Desc.SocketPath, token)
	cmd.Stdin = strings.NewReader(script + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's Python client: %v\n%s", err, out)
	}
	var types []string
	echoed := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		m, err := protocol.Decode([]byte(line))
		if err != nil {
			t.Fatalf("not a frame: %q", line)
		}
		types = append(types, m.MessageType())
		// The echo, not the task's output: the script reads for 2 s, and
		// the echo is sent as the prompt is read, the output only once the
		// task ran.
		if um, ok := m.(*protocol.UserMessage); ok && um.RequestID == "p-1" && um.Text == "$ echo hello from python" {
			echoed = true
		}
	}
	if types[0] != protocol.TypeWelcome || !echoed {
		t.Fatalf("frames %v; want welcome first and the prompt's echo", types)
	}
	d.Stop()
}
