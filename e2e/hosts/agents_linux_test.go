package hosts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// startModelMockIn starts the scripted model endpoint on the loopback of
// network namespace ns, for a CLI that runs there. The listening socket is
// made by a thread that entered ns; the socket stays in ns, and any thread
// may accept on it. That thread is never given back: a goroutine that ends
// while locked to its thread takes the thread with it, so nothing else of
// this process ever runs in ns.
func startModelMockIn(t *testing.T, ns netns, script modelmock.Script) *modelmock.Server {
	t.Helper()
	type started struct {
		mock *modelmock.Server
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // and never unlocked
		f, err := os.Open(filepath.Join("/var/run/netns", string(ns)))
		if err != nil {
			ch <- started{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- started{err: fmt.Errorf("enter namespace %s: %w", ns, err)}
			return
		}
		mock, err := modelmock.Start(script)
		ch <- started{mock, err}
	}()
	s := <-ch
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { s.mock.Close() })
	return s.mock
}

// TestClaudeWorkerOnAHost: a fleet in one network namespace, a host joined
// from another, and a Claude Code worker placed on the host with /spawn
// --host. The CLI runs on the host with the host's own config and
// environment, against a scripted endpoint on the host's loopback (the
// fleet's namespace cannot reach it); its Bash call asks for permission,
// which a console on the fleet's side grants; the command writes a file
// in the host's worktree. The fleet shows the worker on h1 with its tool
// call, file change and tokens, and `fleet merge w1` lands the file in the
// user's repository.
func TestClaudeWorkerOnAHost(t *testing.T) {
	workerOnAHost(t, hostCLI{name: "claude", tag: "c", subnet: "10.233.0", tool: "Bash", call: func(command string) modelmock.ToolCall {
		return modelmock.ToolCall{Name: "Bash", Input: map[string]any{"command": command, "description": "write remote.txt"}}
	}})
}

// TestCodexWorkerOnAHost is TestClaudeWorkerOnAHost with the real Codex
// CLI (codex app-server): its exec_command asks for approval under the
// untrusted policy.
func TestCodexWorkerOnAHost(t *testing.T) {
	workerOnAHost(t, hostCLI{name: "codex", tag: "x", subnet: "10.238.0", tool: "exec_command", call: func(command string) modelmock.ToolCall {
		return modelmock.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": command}}
	}})
}

// TestCopilotWorkerOnAHost is TestClaudeWorkerOnAHost with the real Copilot
// CLI (copilot --acp, BYOK): its bash call asks for permission.
func TestCopilotWorkerOnAHost(t *testing.T) {
	workerOnAHost(t, hostCLI{name: "copilot", tag: "p", subnet: "10.239.0", tool: "bash", call: func(command string) modelmock.ToolCall {
		return modelmock.ToolCall{Name: "bash", Input: map[string]any{"command": command, "description": "write remote.txt"}}
	}})
}

// hostCLI is what differs between the agent CLIs in workerOnAHost.
type hostCLI struct {
	name        string // the provider
	tag, subnet string // the namespaces' tag (nsNames) and /30 (its first three octets)
	tool        string // the shell tool, as the fleet names it
	// call is the model's call of that tool that runs command.
	call func(command string) modelmock.ToolCall
}

// workerOnAHost is a test of an agent CLI as a worker on a host (see
// TestClaudeWorkerOnAHost).
func workerOnAHost(t *testing.T, cli hostCLI) {
	requireRoot(t)
	bin := modelmock.RequireCLI(t, cli.name)
	nsA, nsB := twoNamespaces(t, cli.tag, cli.subnet+".1/30", cli.subnet+".2/30")
	hub := cli.subnet + ".1:7422"

	u := func(in, out int64) modelmock.Usage { return modelmock.Usage{Input: in, Output: out} }
	const command = "echo made on the host > remote.txt"
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "remote", Match: "remote-write:", Turns: []modelmock.Turn{
			{Usage: u(200, 15), ToolCalls: []modelmock.ToolCall{cli.call(command)}},
			{Text: "Wrote remote.txt on the host.", Usage: u(210, 5)},
		}},
	}}
	mock := startModelMockIn(t, nsB, script)

	fleet := in(e2etest.NewEnv(t), nsA)
	fleet.GitRepo()
	d := fleet.Start("--control-socket", "--hosts-listen", hub)
	joinFile := filepath.Join(t.TempDir(), "h1.join")
	if _, stderr, code := fleet.Fleet("", "hosts", "add", "h1", "--out", joinFile); code != 0 {
		t.Fatalf("fleet hosts add: exit %d\n%s", code, stderr)
	}

	// The host's own config names its CLI and the CLI's environment; the
	// fleet's has neither.
	host := in(e2etest.NewEnv(t), nsB)
	cfg, _ := json.Marshal(map[string]any{"providers": map[string]any{cli.name: map[string]any{"path": bin, "env": e2etest.CLIEnv(t, cli.name, mock.URL())}}})
	if err := os.WriteFile(filepath.Join(host.Home, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	workDir := filepath.Join(t.TempDir(), "work")
	join := host.Spawn("join", joinFile, "--work-dir", workDir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fleet:\n%s\njoin:\n%s", d.Stderr, join.Stderr)
		}
	})
	testwait.For(t, time.Minute, "h1 to be up with "+cli.name, func() bool {
		list := listHosts(fleet)
		if len(list) != 1 || list[0].State != "up" {
			return false
		}
		for _, p := range list[0].Providers {
			if p.Name == cli.name {
				return true
			}
		}
		return false
	})

	watcher := e2etest.Watch(t, d.Dial(protocol.ClientOther, "watcher"))
	op := d.Dial(protocol.ClientOther, "op")
	watcher.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if err := op.Send(&protocol.Prompt{Text: "/spawn --host h1 --provider " + cli.name + " remote-write: make remote.txt"}); err != nil {
		t.Fatal(err)
	}
	ask := watcher.WaitLong("the "+cli.tool+" permission", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	if !strings.Contains(ask.Question, cli.tool) || !strings.Contains(ask.Question, command) {
		t.Fatalf("permission request %q", ask.Question)
	}
	allow := ""
	for _, c := range ask.Choices {
		if c.Description == string(provider.AllowOnce) {
			allow = c.Value
			break
		}
	}
	if allow == "" {
		t.Fatalf("permission request %q offers no allow once: %+v", ask.Question, ask.Choices)
	}
	if err := op.Send(&protocol.AskResponse{ID: ask.ID, Text: allow}); err != nil {
		t.Fatal(err)
	}
	var (
		resolved *protocol.ConfirmResolved
		call     *protocol.ToolCall
		change   *protocol.FileChangeEntry
		said     bool
		settled  *protocol.HubEvent
	)
	// One bound for all of it: the fleet sends frames all along (its
	// state, as the host reports), so a bound per frame would never pass.
	deadline := time.Now().Add(3 * time.Minute)
	for resolved == nil || call == nil || change == nil || !said || settled == nil {
		switch m := watcher.WaitWithin(time.Until(deadline), "w1 to run its command and settle (3 minutes in all)", func(protocol.Message) bool { return true }).(type) {
		case *protocol.ConfirmResolved:
			if m.ID == ask.ID {
				resolved = m
			}
		case *protocol.ToolCall:
			if m.Tool == cli.tool && m.Phase == protocol.PhaseComplete {
				call = m
			}
		case *protocol.FileChange:
			for _, c := range m.Changes {
				if c.Path == "remote.txt" {
					change = &c
				}
			}
		case *protocol.Transcript:
			said = said || m.Agent == "w1" && m.Role == protocol.RoleAssistant && m.Text == "Wrote remote.txt on the host."
		case *protocol.HubEvent:
			if m.From == "w1" && (m.Kind == protocol.HubCompleted || m.Kind == protocol.HubFailed) {
				settled = m
			}
		}
	}
	if !resolved.Approved || resolved.Reason != protocol.ReasonAnswered {
		t.Fatalf("the permission resolved %+v", resolved)
	}
	if call.Agent != "w1" || call.ToolCallID == "" || (call.IsError != nil && *call.IsError) {
		t.Fatalf("the %s call %+v", cli.tool, call)
	}
	if change.Agent != "w1" || change.Tool != cli.tool || change.ChangeType != protocol.ChangeCreated {
		t.Fatalf("the fileChange %+v", change)
	}
	if settled.Kind != protocol.HubCompleted {
		t.Fatalf("w1 settled %s: %s", settled.Kind, settled.Text)
	}
	// The command ran on the host, in its worktree there.
	if got, _ := filepath.Glob(filepath.Join(workDir, "runs", "*", "remote.txt")); len(got) != 1 {
		t.Fatalf("remote.txt in the host's work dir: %v", got)
	}

	// The tokens are what the endpoint in the host's namespace reported.
	reqs := mock.Requests()
	in, out := e2etest.AnsweredUsage(script, reqs)
	if in < 200+210 {
		t.Fatalf("the endpoint answered %d input tokens in %d requests", in, len(reqs))
	}
	var w1 protocol.FleetWorkerSummary
	watcher.WaitLong("w1 on h1, completed, with its tokens and its branch", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		if !ok {
			return false
		}
		for _, w := range fs.Workers {
			if w.ID == "w1" {
				w1 = w
			}
		}
		return w1.Status == "completed" && w1.InputTokens != nil && w1.OutputTokens != nil && w1.Git != nil && w1.Git.Ahead > 0 &&
			fs.Tokens != nil && fs.Tokens.InputTokens != nil && *fs.Tokens.InputTokens == in &&
			fs.Tokens.OutputTokens != nil && *fs.Tokens.OutputTokens == out
	})
	if w1.Host != "h1" || w1.AgentType != cli.name || *w1.InputTokens != in || *w1.OutputTokens != out || w1.TokenCount == 0 {
		t.Fatalf("w1 %+v, want on h1 with %d/%d tokens", w1, in, out)
	}
	if g := w1.Git; g.Uncommitted != 0 || len(g.Files) != 1 || g.Files[0].Path != "remote.txt" {
		t.Fatalf("w1's branch %+v", g)
	}

	t.Logf("w1 on %s: %d/%d tokens, %s at %s", w1.Host, in, out, w1.Git.Branch, w1.Git.Head)
	mergeOut, stderr, code := fleet.Fleet("", "merge", "w1")
	if code != 0 || !strings.Contains(mergeOut, "Merged w1") {
		t.Fatalf("fleet merge w1 (%d): %s%s", code, mergeOut, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(fleet.Dir, "remote.txt")); string(got) != "made on the host\n" {
		t.Fatalf("remote.txt in the repository: %q", got)
	}

	join.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-join.Done:
		if join.Err != nil {
			t.Fatalf("fleet join exited with %v", join.Err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fleet join did not stop")
	}
	d.Stop()
}
