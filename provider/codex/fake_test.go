package codex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// The fake CLIs below are shell scripts standing in for `codex app-server`:
// they read our requests line by line (ids: initialize 1, thread/start 2,
// turn/start 3) and print what a broken CLI would.

const fakeHandshake = `read -r l; printf '%s\n' '{"id":1,"result":{}}'
read -r l
read -r l; printf '%s\n' '{"id":2,"result":{"thread":{"id":"fake-thread"},"model":"fake-model"}}'
`

// fakeSpec is a spec whose environment carries a unique mark, so a test
// can find whatever the fake left running.
func fakeSpec(t *testing.T) (provider.Spec, string) {
	mark := "fake-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return provider.Spec{
		Agent: "w1",
		Dir:   t.TempDir(),
		Env:   []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CODEX_HOME=" + t.TempDir(), "FAKE_MARK=" + mark},
	}, mark
}

func TestFakeExitsAtStart(t *testing.T) {
	spec, mark := fakeSpec(t)
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", "echo 'fatal: config.toml is broken' >&2\nexit 3\n")})
	_, err := p.Start(t.Context(), spec, agentclitest.NewHost(allow))
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, w := range []string{"exit status 3", "fatal: config.toml is broken", "initialize"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Start error %q lacks %q", err, w)
		}
	}
	if left := proctree.FindMarked("FAKE_MARK", mark); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

func TestFakeHangsWithoutOutput(t *testing.T) {
	spec, mark := fakeSpec(t)
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", "echo starting up >&2\nsleep 300 &\nexec sleep 301\n")})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := p.Start(ctx, spec, agentclitest.NewHost(allow))
	if err == nil || !strings.Contains(err.Error(), "did not answer initialize") || !strings.Contains(err.Error(), "starting up") {
		t.Fatalf("Start error = %v, want no answer to initialize, with the stderr", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Start took %v", d)
	}
	if left := proctree.FindMarked("FAKE_MARK", mark); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

// A CLI that prints garbage and then crashes mid-turn: the garbage is
// noted once, the turn ends with the exit and the stderr, Done closes.
func TestFakeGarbageThenCrash(t *testing.T) {
	spec, mark := fakeSpec(t)
	script := fakeHandshake + `read -r l
echo 'this is not json'
echo '{"broken": '
echo '[1,2,3]'
echo '{"method":"some/new/notification","params":{}}'
echo 'thread panicked at core/src/codex.rs: boom' >&2
exit 2
`
	h := agentclitest.NewHost(allow)
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", script)}), spec, h)
	send(t, s, "go")
	evs := h.WaitTurns(t, 1, wait)
	agentclitest.WaitDone(t, s, wait)
	te := agentclitest.All[provider.TurnEnded](evs)[0]
	if te.Err == nil || !strings.Contains(te.Err.Error(), "exit status 2") || !strings.Contains(te.Err.Error(), "panicked at core/src/codex.rs: boom") {
		t.Errorf("TurnEnded.Err = %v, want the exit and the stderr", te.Err)
	}
	if s.Err() == nil || s.Err().Error() != te.Err.Error() {
		t.Errorf("Err = %v", s.Err())
	}
	if notes := agentclitest.All[provider.Note](evs); len(notes) != 1 || !strings.Contains(notes[0].Text, "not JSON-RPC") {
		t.Errorf("notes = %+v, want one about the garbage", notes)
	}
	if s.rd.garbage != 3 || s.rd.unknown != 1 {
		t.Errorf("garbage %d unknown %d, want 3 and 1", s.rd.garbage, s.rd.unknown)
	}
	if err := s.Send(t.Context(), provider.Turn{Text: "again"}); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Send after the crash = %v", err)
	}
	if left := proctree.FindMarked("FAKE_MARK", mark); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

func bigMessage(n int) string {
	return `read -r l
printf '%s\n' '{"id":3,"result":{"turn":{"id":"t1"}}}'
` + agentclitest.BigLine(`{"method":"item/completed","params":{"threadId":"fake-thread","turnId":"t1","item":{"type":"agentMessage","id":"m1","text":"`, n, `"}}}`) + `printf '%s\n' '{"method":"turn/completed","params":{"threadId":"fake-thread","turn":{"id":"t1","status":"completed","items":[]}}}'
read -r l
`
}

func TestFake5MBLine(t *testing.T) {
	spec, _ := fakeSpec(t)
	h := agentclitest.NewHost(allow)
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", fakeHandshake+bigMessage(5_000_000))}), spec, h)
	send(t, s, "go")
	evs := h.WaitTurns(t, 1, wait)
	te := agentclitest.All[provider.TurnEnded](evs)[0]
	texts := agentclitest.All[provider.Text](evs)
	if te.Err != nil || len(texts) != 1 || len(texts[0].Text) != 5_000_000 || len(te.Result) != 5_000_000 {
		t.Fatalf("TurnEnded.Err = %v, %d texts", te.Err, len(texts))
	}
}

func TestFake20MBLine(t *testing.T) {
	spec, mark := fakeSpec(t)
	h := agentclitest.NewHost(allow)
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", fakeHandshake+bigMessage(20_000_000))}), spec, h)
	send(t, s, "go")
	evs := h.WaitTurns(t, 1, wait)
	agentclitest.WaitDone(t, s, wait)
	te := agentclitest.All[provider.TurnEnded](evs)[0]
	if te.Err == nil || !strings.Contains(te.Err.Error(), "longer than 8 MiB") {
		t.Fatalf("TurnEnded.Err = %v, want the over-long line", te.Err)
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "longer than 8 MiB") {
		t.Errorf("Err = %v", s.Err())
	}
	if left := proctree.FindMarked("FAKE_MARK", mark); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

// A turn/start the CLI refuses ends the turn with its error.
func TestFakeTurnStartRefused(t *testing.T) {
	spec, _ := fakeSpec(t)
	script := fakeHandshake + `read -r l
printf '%s\n' '{"id":3,"error":{"code":-32600,"message":"thread not found: fake-thread"}}'
read -r l
`
	h := agentclitest.NewHost(allow)
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", script)}), spec, h)
	send(t, s, "go")
	evs := h.WaitTurns(t, 1, wait)
	if te := agentclitest.All[provider.TurnEnded](evs)[0]; te.Err == nil || !strings.Contains(te.Err.Error(), "thread not found") {
		t.Fatalf("TurnEnded = %+v", te)
	}
}

// A server request the adapter does not know gets a JSON-RPC error; a
// permission whose answer comes after the CLI exited does no harm.
func TestFakeUnknownRequestAndLateAnswer(t *testing.T) {
	spec, _ := fakeSpec(t)
	out := filepath.Join(t.TempDir(), "answers")
	script := fakeHandshake + `read -r l
printf '%s\n' '{"id":3,"result":{"turn":{"id":"t1"}}}'
printf '%s\n' '{"id":"x1","method":"item/tool/call","params":{}}'
read -r a; printf '%s\n' "$a" > ` + out + `
printf '%s\n' '{"id":7,"method":"item/commandExecution/requestApproval","params":{"itemId":"c1","threadId":"fake-thread","turnId":"t1","startedAtMs":1,"command":"rm -rf /"}}'
exit 0
`
	release := make(chan struct{})
	h := agentclitest.NewHost(func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
		<-release
		return provider.Decision{Allow: true}, nil
	})
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", script)}), spec, h)
	send(t, s, "go")
	h.WaitFor(t, wait, "the permission prompt", func([]provider.Event, []provider.PermissionRequest) bool { _, p := h.Snapshot(); return len(p) == 1 })
	agentclitest.WaitDone(t, s, wait)
	close(release)
	h.WaitTurns(t, 1, wait)
	s.Close()
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `"id":"x1"`) || !strings.Contains(string(b), `"error"`) {
		t.Errorf("answer to the unknown request = %q, %v", b, err)
	}
}

// A CLI that ignores its stdin closing is killed after the grace; Close
// stays bounded and leaves nothing.
func TestFakeIgnoresStdinClose(t *testing.T) {
	spec, mark := fakeSpec(t)
	h := agentclitest.NewHost(allow)
	s := startWith(t, New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", fakeHandshake+"trap '' TERM HUP\nsleep 300 &\nexec sleep 301\n")}), spec, h)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > agentcli.ExitGrace+10*time.Second {
		t.Errorf("Close took %v", d)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close = %v", s.Err())
	}
	if left := proctree.FindMarked("FAKE_MARK", mark); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

// A session runs on whatever Process its Launcher gives, not only a local
// one (agentclitest.Opaque hides that it is).
func TestFakeOnAnyProcess(t *testing.T) {
	spec, _ := fakeSpec(t)
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "codex", fakeHandshake+bigMessage(5))})
	p.Launcher = agentclitest.Opaque
	h := agentclitest.NewHost(allow)
	s := startWith(t, p, spec, h)
	if _, local := s.cli.Process().(*agentcli.Proc); local {
		t.Fatal("the session runs on a local Proc")
	}
	send(t, s, "go")
	if te := h.TurnEnded(t, 1, wait); te.Err != nil || te.Result != "aaaaa" {
		t.Errorf("TurnEnded = %+v", te)
	}
	if err := s.Close(); err != nil || s.Err() != nil {
		t.Errorf("Close %v, Err %v", err, s.Err())
	}
}
