package claude

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// The fault tests run shell scripts in the CLI's place (Options.Path), so
// each failure happens exactly where the test wants it.

// preamble answers the initialize control request like the CLI does.
const preamble = `#!/bin/sh
read -r line
printf '%s\n' '{"type":"control_response","response":{"subtype":"success","request_id":"init-1","response":{}}}'
`

// turnStart reads the user message and prints the turn's system/init.
const turnStart = `read -r msg
printf '%s\n' '{"type":"system","subtype":"init","session_id":"fake-session","model":"fake-model"}'
`

const resultOK = `printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":5,"output_tokens":1}}'
`

// drain keeps the fake CLI alive until stdin closes, like the real one.
const drain = `while read -r line; do :; done
`

func startFake(t *testing.T, path string, h provider.Host, bound time.Duration) (*session, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	spec := provider.Spec{Dir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}}
	ps, err := New(provider.Options{Path: path}).Start(ctx, spec, h)
	if err != nil {
		return nil, err
	}
	s := ps.(*session)
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// noProcess reports the pids whose command line is exactly argv.
func noProcess(argv ...string) func() []int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	return func() []int {
		var found []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.Equal(b, want) {
				found = append(found, pid)
			}
		}
		return found
	}
}

func wantDone(t *testing.T, s *session) { agentclitest.WaitDone(t, s, 30*time.Second) }

func TestFakeExitsAtStart(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", "#!/bin/sh\necho 'claude: fatal: the config is broken' >&2\nexit 3\n")
	_, err := startFake(t, path, newHost(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "the config is broken") {
		t.Fatalf("Start = %v; want the exit status and the stderr tail", err)
	}
}

func TestFakeGarbageThenCrashAtStart(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", "#!/bin/sh\necho 'this is not json'\necho '{neither is this'\necho boom >&2\nexit 1\n")
	_, err := startFake(t, path, newHost(), 30*time.Second)
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, w := range []string{"exit status 1", "boom", "2 line(s) that are not JSON", "this is not json"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Start error %q lacks %q", err, w)
		}
	}
}

func TestFakeResumeFails(t *testing.T) {
	// What the real CLI does for an unknown --resume id: a result line
	// with errors[], then exit 1.
	path := agentclitest.FakeCLI(t, "claude", "#!/bin/sh\nread -r line\n"+
		`printf '%s\n' '{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: 9999"]}'`+
		"\necho 'No conversation found with session ID: 9999' >&2\nexit 1\n")
	_, err := startFake(t, path, newHost(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "No conversation found") {
		t.Fatalf("Start = %v", err)
	}
}

func TestFakeCrashMidTurn(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+
		`printf '%s\n' '{"type":"assistant","message":{"id":"m1","model":"fake","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make"}}]},"parent_tool_use_id":null}'
echo 'garbage one'
echo 'garbage two'
echo 'claude: internal error: out of cheese' >&2
exit 2
`)
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	te := h.TurnEnded(t, 1, 30*time.Second)
	wantDone(t, s)
	for _, w := range []string{"exit status 2", "out of cheese"} {
		if te.Err == nil || !strings.Contains(te.Err.Error(), w) {
			t.Fatalf("TurnEnded.Err = %v; want %q in it", te.Err, w)
		}
	}
	if s.Err() == nil || s.Err().Error() != te.Err.Error() {
		t.Fatalf("Err = %v; want the turn's reason", s.Err())
	}
	evs, _ := h.Snapshot()
	if notes := agentclitest.All[provider.Note](evs); len(notes) != 1 || !strings.Contains(notes[0].Text, "garbage one") {
		t.Fatalf("notes = %+v; want the garbage reported once", notes)
	}
	if s.st.garbage != 2 {
		t.Fatalf("garbage lines counted: %d", s.st.garbage)
	}
	// The tool call that never completed is completed as an error.
	if done := agentclitest.All[provider.ToolCompleted](evs); len(done) != 1 || done[0].ID != "t1" || !done[0].IsError {
		t.Fatalf("tool completions = %+v", done)
	}
	if err := s.Send(context.Background(), provider.Turn{Text: "again"}); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Send after the crash = %v", err)
	}
	if err := s.Interrupt(context.Background()); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Interrupt after the crash = %v", err)
	}
}

// bigLine prints an assistant text line of n bytes of text.
func bigLine(n int) string {
	return agentclitest.BigLine(`{"type":"assistant","message":{"id":"m1","model":"fake","content":[{"type":"text","text":"`, n, `"}]},"parent_tool_use_id":null}`)
}

func TestFake5MBLine(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+bigLine(5_000_000)+resultOK+drain)
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	if te := h.TurnEnded(t, 1, 60*time.Second); te.Err != nil {
		t.Fatalf("turn: %v", te.Err)
	}
	evs, _ := h.Snapshot()
	texts := agentclitest.All[provider.Text](evs)
	if len(texts) != 1 || len(texts[0].Text) != 5_000_000 || strings.Trim(texts[0].Text, "a") != "" {
		t.Fatalf("got %d texts; want one of 5,000,000 bytes", len(texts))
	}
}

func TestFake20MBLine(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+bigLine(20_000_000)+resultOK+drain)
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	te := h.TurnEnded(t, 1, 60*time.Second)
	wantDone(t, s)
	if te.Err == nil || !strings.Contains(te.Err.Error(), "longer than 8 MiB") {
		t.Fatalf("TurnEnded.Err = %v; want the over-long line named", te.Err)
	}
	if s.Err() == nil {
		t.Fatal("Err is nil")
	}
}

func TestFakeHangsAtStart(t *testing.T) {
	path := agentclitest.FakeCLI(t, "claude", "#!/bin/sh\nsleep 987654\n")
	start := time.Now()
	_, err := startFake(t, path, newHost(), 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("Start = %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("Start took %v with a 2s ctx", d)
	}
	agentclitest.WaitGone(t, 10*time.Second, noProcess("sleep", "987654"))
}

func TestFakeHangsMidTurn(t *testing.T) {
	// It takes the turn, then ignores everything: the interrupt, stdin's
	// end. Close must still end it in bounded time.
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+"sleep 987655\n")
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	h.WaitFor(t, 30*time.Second, "SessionStarted", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return len(agentclitest.All[provider.SessionStarted](evs)) == 1
	})
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > closeInterruptGrace+agentcli.ExitGrace+10*time.Second {
		t.Fatalf("Close took %v", d)
	}
	te := h.TurnEnded(t, 1, time.Second)
	if !te.Interrupted || te.Err == nil || !strings.Contains(te.Err.Error(), "stopped") {
		t.Fatalf("TurnEnded = %+v; want Interrupted with why it was stopped", te)
	}
	if s.Err() != nil {
		t.Fatalf("Err after Close = %v", s.Err())
	}
	agentclitest.WaitGone(t, 10*time.Second, noProcess("sleep", "987655"))
}

func TestFakeInterruptIgnored(t *testing.T) {
	// A CLI that does not act on the interrupt is killed interruptBound
	// later, and the turn ends as interrupted with that reason.
	if testing.Short() {
		t.Skip("waits for the interrupt bound")
	}
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+"sleep 987656\n")
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	h.WaitFor(t, 30*time.Second, "SessionStarted", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return len(agentclitest.All[provider.SessionStarted](evs)) == 1
	})
	if err := s.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	te := h.TurnEnded(t, 1, interruptBound+20*time.Second)
	wantDone(t, s)
	if !te.Interrupted || te.Err == nil || !strings.Contains(te.Err.Error(), "after the interrupt") {
		t.Fatalf("TurnEnded = %+v", te)
	}
	agentclitest.WaitGone(t, 10*time.Second, noProcess("sleep", "987656"))
}

func TestFakeUnknownLines(t *testing.T) {
	dir := t.TempDir()
	reply := filepath.Join(dir, "reply.json")
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+
		`printf '%s\n' '{"type":"stream_event","event":{"type":"message_start"}}'
printf '%s\n' '{"type":"system","subtype":"status","status":"requesting"}'
printf '%s\n' '{"type":"brand_new_kind","payload":[1,2,{"x":"y"}]}'
printf '%s\n' '{"type":"control_request","request_id":"hook-1","request":{"subtype":"hook_callback","callback_id":"x"}}'
read -r answer
printf '%s\n' "$answer" > `+reply+`
`+resultOK+drain)
	h := newHost()
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	if te := h.TurnEnded(t, 1, 30*time.Second); te.Err != nil || te.Result != "ok" {
		t.Fatalf("turn: %+v", te)
	}
	b, _ := os.ReadFile(reply)
	if !strings.Contains(string(b), `"request_id":"hook-1"`) || !strings.Contains(string(b), `"subtype":"error"`) {
		t.Fatalf("the CLI's hook_callback got %q; want an error answer", b)
	}
	s.Close()
	for _, k := range []string{"stream_event", "system/status", "brand_new_kind", "control_request/hook_callback"} {
		if s.st.unknown[k] != 1 {
			t.Fatalf("unknown counts = %v; want %s once", s.st.unknown, k)
		}
	}
}

func TestFakePermissionAfterExit(t *testing.T) {
	// The CLI asks, then dies while the operator has not answered: the
	// prompt's ctx ends, the answer has nowhere to go, nothing hangs.
	path := agentclitest.FakeCLI(t, "claude", preamble+turnStart+
		`printf '%s\n' '{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf /tmp/x"},"description":"remove x","tool_use_id":"t1"}}'
sleep 0.2
echo 'claude died' >&2
exit 4
`)
	h := newHost()
	ended := make(chan error, 1)
	h.Decide = func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return provider.Decision{}, provider.ErrNoAnswer
	}
	s, err := startFake(t, path, h, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "go")
	te := h.TurnEnded(t, 1, 30*time.Second)
	wantDone(t, s)
	if te.Err == nil || !strings.Contains(te.Err.Error(), "exit status 4") || !strings.Contains(te.Err.Error(), "claude died") {
		t.Fatalf("TurnEnded = %+v", te)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the pending permission's ctx did not end")
	}
	_, perms := h.Snapshot()
	if len(perms) != 1 || perms[0].Tool != "Bash" || perms[0].Description != "remove x" || perms[0].Input["command"] != "rm -rf /tmp/x" {
		t.Fatalf("permission requests = %+v", perms)
	}
}

func TestMissingCLI(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "no-such-claude"), "no-such-claude-in-path"} {
		p := New(provider.Options{Path: path})
		_, err := p.Start(context.Background(), provider.Spec{Dir: t.TempDir(), Env: []string{"PATH=" + t.TempDir()}}, newHost())
		var me *provider.MissingCLIError
		if !errors.As(err, &me) || me.Package != Package || me.ConfigKey != ConfigKey || me.Command != path {
			t.Fatalf("Start(%q) = %v; want a MissingCLIError naming %s and %s", path, err, Package, ConfigKey)
		}
		in := p.Inspect(context.Background(), []string{"PATH=" + t.TempDir()})
		if !errors.As(in.Err, &me) || in.Path != "" {
			t.Fatalf("Inspect = %+v", in)
		}
	}
}
