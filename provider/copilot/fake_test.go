package copilot

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// fakeHandshake answers initialize (id 1) and session/new (id 2) as the
// real CLI does, then reads the prompt (id 3).
const fakeHandshake = `read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}'
read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"fake-1"}}'
read -r l
`

func fakeSpec(t *testing.T) provider.Spec {
	return provider.Spec{Agent: "w1", Dir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}}
}

func startFake(t *testing.T, body string, h provider.Host) *session {
	t.Helper()
	return startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "copilot", body)}), fakeSpec(t), h)
}

func TestFakeExitsAtStart(t *testing.T) {
	t.Parallel()
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "copilot", "echo 'copilot: no config here' >&2; exit 3\n")})
	start := time.Now()
	_, err := p.Start(t.Context(), fakeSpec(t), agentclitest.NewHost(allow))
	if err == nil || !strings.Contains(err.Error(), "no config here") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Start took %v", d)
	}
	t.Log(err)
}

func TestFakeHangsWithoutOutput(t *testing.T) {
	t.Parallel()
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "copilot", "sleep 300\n")})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Start(ctx, fakeSpec(t), agentclitest.NewHost(allow))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Start: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Start took %v to give up", d)
	}
	t.Log(err)
}

func TestFakeGarbageThenCrash(t *testing.T) {
	t.Parallel()
	h := agentclitest.NewHost(allow)
	s := startFake(t, fakeHandshake+`echo 'not json at all'
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"partial"}}}}'
echo '{"no":"rpc"}'
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-1","update":{"sessionUpdate":"brand_new_kind"}}}'
echo '{"jsonrpc":"2.0","method":"x/unknown","params":{}}'
echo 'panic: the fake crashed' >&2
exit 1
`, h)
	send(t, s, "hello")
	evs := h.WaitTurns(t, 1, wait)
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if te.Err == nil || !strings.Contains(te.Err.Error(), "exit status 1") || !strings.Contains(te.Err.Error(), "panic: the fake crashed") {
		t.Errorf("TurnEnded.Err %v", te.Err)
	}
	t.Log(te.Err)
	if te.Result != "partial" {
		t.Errorf("TurnEnded.Result %q", te.Result)
	}
	agentclitest.WaitDone(t, s, wait)
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "panic: the fake crashed") {
		t.Errorf("Err %v", err)
	}
	notes := agentclitest.All[provider.Note](evs)
	if len(notes) != 1 || !strings.Contains(notes[0].Text, "not json at all") {
		t.Errorf("notes %+v", notes)
	}
	if s.rs.garbageLines != 2 || s.rs.unknown != 2 {
		t.Errorf("%d garbage lines, %d unknown", s.rs.garbageLines, s.rs.unknown)
	}
	if err := s.Send(t.Context(), provider.Turn{Text: "more"}); err != provider.ErrClosed {
		t.Errorf("Send after the crash: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// bigChunk prints a message chunk whose text is n bytes of 'a'.
func bigChunk(n int) string {
	return agentclitest.BigLine(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, n, `"}}}}`)
}

func TestFake5MBLine(t *testing.T) {
	t.Parallel()
	h := agentclitest.NewHost(allow)
	s := startFake(t, fakeHandshake+bigChunk(5<<20)+`printf '%s\n' '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'
read -r l
`, h)
	send(t, s, "hello")
	evs := h.WaitTurns(t, 1, wait)
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if te.Err != nil || len(te.Result) != 5<<20 {
		t.Errorf("TurnEnded err %v, result %d bytes", te.Err, len(te.Result))
	}
	if txt := agentclitest.Last[provider.Text](t, evs); len(txt.Text) != 5<<20 {
		t.Errorf("Text of %d bytes", len(txt.Text))
	}
}

func TestFake20MBLine(t *testing.T) {
	t.Parallel()
	h := agentclitest.NewHost(allow)
	s := startFake(t, fakeHandshake+bigChunk(20<<20)+"sleep 300\n", h)
	send(t, s, "hello")
	evs := h.WaitTurns(t, 1, wait)
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if te.Err == nil || !strings.Contains(te.Err.Error(), "longer than 8 MiB") {
		t.Errorf("TurnEnded.Err %v", te.Err)
	}
	t.Log(te.Err)
	agentclitest.WaitDone(t, s, wait)
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "longer than 8 MiB") {
		t.Errorf("Err %v", err)
	}
	if left := agentclitest.Alive(s.cli); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestFakeClientRequests: an fs/terminal request is refused at once, and a
// permission answered after the CLI exited is dropped without harm.
func TestFakeClientRequests(t *testing.T) {
	t.Parallel()
	answered := make(chan struct{})
	h := agentclitest.NewHost(func(ctx context.Context, _ provider.PermissionRequest) (provider.Decision, error) {
		<-answered
		return provider.Decision{Allow: true}, nil
	})
	s := startFake(t, fakeHandshake+`printf '%s\n' '{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"sessionId":"fake-1","path":"/etc/passwd"}}'
read -r l; echo "$l" >&2
printf '%s\n' '{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"fake-1","toolCall":{"toolCallId":"t1","title":"x","kind":"execute","rawInput":{"command":"ls"}},"options":[{"optionId":"allow_once","kind":"allow_once","name":"Allow once"}]}}'
printf '%s\n' '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'
exit 0
`, h)
	send(t, s, "hello")
	evs := h.WaitTurns(t, 1, wait)
	agentclitest.WaitDone(t, s, wait)
	close(answered)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil {
		t.Errorf("TurnEnded %+v", te)
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), `"code":-32601`) {
		t.Errorf("Err %v (should carry the CLI's stderr: the method-not-found answer)", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestFakeIgnoresStdinClose: a CLI that does not exit when stdin closes is
// killed, within Close's bound.
func TestFakeIgnoresStdinClose(t *testing.T) {
	t.Parallel()
	s := startFake(t, fakeHandshake+"trap '' TERM INT; while :; do sleep 1; done\n", agentclitest.NewHost(allow))
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Close took %v", d)
	}
	if left := agentclitest.Alive(s.cli); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}
