package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// The console tests run `fleet console` in a real terminal: a tmux session
// of its own (its own server socket), driven with send-keys and read with
// capture-pane, the way an operator would see it.

type tmuxConsole struct {
	t      *testing.T
	socket string
	name   string
	log    string
}

const consoleWait = 60 * time.Second // generous: CI runs the race detector beside other work

// startConsole runs `fleet console args...` in a WxH tmux window with e's
// environment.
func startConsole(t *testing.T, e *e2etest.Env, w, h int, args ...string) *tmuxConsole {
	t.Helper()
	e2etest.RequireTool(t, "tmux")
	// Not t.TempDir: the tmux server and the console may still be writing
	// there while they exit, after kill-server returned.
	dir, err := os.MkdirTemp("", "tmuxc")
	if err != nil {
		t.Fatal(err)
	}
	c := &tmuxConsole{t: t, socket: filepath.Join(dir, "tmux.sock"), name: "console"}
	c.log = filepath.Join(dir, "console.stderr")
	var envs []string
	for _, kv := range e.Environ() {
		if strings.HasPrefix(kv, "AGENTS_FLEET_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "NO_COLOR=") {
			envs = append(envs, kv)
		}
	}
	envs = append(envs, "TERM=xterm-256color")
	cmdline := "env"
	for _, kv := range envs {
		cmdline += " " + shellQuote(kv)
	}
	cmdline += " " + shellQuote(e2etest.Bin()) + " console"
	for _, a := range args {
		cmdline += " " + shellQuote(a)
	}
	cmdline += " 2>" + shellQuote(c.log) + "; echo CONSOLE-EXITED $?; sleep 600"
	out, err := exec.Command("tmux", "-S", c.socket, "-f", "/dev/null", "new-session", "-d", "-s", c.name,
		"-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "-c", e.Dir, cmdline).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console screen at the end:\n%s", c.screen())
			if b, err := os.ReadFile(c.log); err == nil && len(b) > 0 {
				t.Logf("console stderr:\n%s", b)
			}
		}
		exec.Command("tmux", "-S", c.socket, "kill-server").Run()
		testwait.Until(10*time.Second, func() bool { _, err := os.Stat(c.socket); return os.IsNotExist(err) })
		os.RemoveAll(dir)
	})
	return c
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// screen is what the terminal shows now.
func (c *tmuxConsole) screen() string {
	out, err := exec.Command("tmux", "-S", c.socket, "capture-pane", "-p", "-t", c.name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, Escape, Up, …) or literal text with -l.
func (c *tmuxConsole) keys(keys ...string) {
	c.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", c.socket, "send-keys", "-t", c.name}, keys...)...).CombinedOutput(); err != nil {
		c.t.Fatalf("send-keys %v: %v\n%s", keys, err, out)
	}
}

// typeText types s literally.
func (c *tmuxConsole) typeText(s string) {
	c.t.Helper()
	if out, err := exec.Command("tmux", "-S", c.socket, "send-keys", "-t", c.name, "-l", s).CombinedOutput(); err != nil {
		c.t.Fatalf("send-keys -l: %v\n%s", err, out)
	}
}

// waitScreen waits until the screen satisfies ok and returns it.
func (c *tmuxConsole) waitScreen(what string, ok func(string) bool) string {
	c.t.Helper()
	var s string
	if !testwait.Until(consoleWait, func() bool {
		s = c.screen()
		if strings.Contains(s, "CONSOLE-EXITED") && !ok(s) {
			c.t.Fatalf("the console exited while waiting for %s:\n%s", what, s)
		}
		return ok(s)
	}) {
		c.t.Fatalf("timed out waiting for %s; the screen:\n%s", what, s)
	}
	return s
}

// submit types a prompt line and sends it with Enter, which gives the
// keys back to the views (the line says so).
func (c *tmuxConsole) submit(text string) {
	c.t.Helper()
	c.keys(":")
	c.waitText("keys go to the prompt") // the line has the focus
	c.typeText(text)
	c.keys("Enter")
	c.waitText("press : to type")
}

func (c *tmuxConsole) waitText(sub string) string {
	c.t.Helper()
	return c.waitScreen(fmt.Sprintf("%q on the screen", sub), func(s string) bool { return strings.Contains(s, sub) })
}

// TestConsoleOperatesFleetsInTmux: the console on a fleet of Claude Code
// agents (the real CLI against the scripted endpoint) and a local fleet,
// in a real terminal: prompt the coordinator, approve both workers'
// permission requests from the Requests view, follow a worker, view its
// diff, merge it, pause dispatch, switch to the other fleet and answer its
// question, and survive that fleet's restart without duplicated history.
func TestConsoleOperatesFleetsInTmux(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
	agents := ae.Start("--control-socket", "--provider", "claude", "--name", "agents")
	le := &e2etest.Env{T: t, Home: ae.Home, Dir: t.TempDir()}
	le.GitRepo()
	shell := le.Start("--control-socket", "--name", "shell")
	c := startConsole(t, ae.Env, 110, 32, "agents")
	c.waitText("fleet agents")

	// A prompt for the coordinator, from the prompt line.
	c.submit("Add a greeting and a farewell to the repo")
	c.waitText("waiting — press 5")
	c.keys("r")
	for range 2 { // the two workers' permission requests, one after the other
		scr := c.waitScreen("a request selected in the Requests view", func(s string) bool {
			return strings.Contains(s, "oldest first") && strings.Contains(s, "▸ [1/") && strings.Contains(s, "wants to use")
		})
		id := regexp.MustCompile(`▸ \[1/\d\] ask \(choice\) (\S+)`).FindStringSubmatch(scr)
		if id == nil {
			t.Fatalf("no selected request on the screen:\n%s", scr)
		}
		c.keys("1") // "Allow once"
		c.waitScreen(id[1]+" resolved", func(s string) bool { return !strings.Contains(s, id[1]) })
	}
	c.waitText("no requests waiting")

	c.keys("1")
	c.waitScreen("both workers done", func(s string) bool {
		return strings.Count(s, "completed") >= 2 && strings.Contains(s, "w1") && strings.Contains(s, "w2")
	})
	// Follow w1's transcript, then back to the table.
	c.keys("Enter")
	c.waitText("following")
	c.keys("Escape")
	c.waitText("enter transcript")
	// Its diff, in the Workers view, and as the fleet's reply.
	c.keys("d")
	c.waitText("w1 · diff")
	c.waitText("+hello")
	c.keys("Escape")
	c.waitText("enter transcript")
	c.keys("6")
	c.waitText("hello.txt")
	// Merge it, with the confirmation step.
	c.keys("1")
	c.waitText("enter transcript")
	c.keys("m")
	c.waitText("y/n")
	c.keys("y")
	c.keys("6")
	c.waitText("into main")
	// Apply w2's change to the work tree here, with the confirmation step.
	c.keys("1")
	c.waitText("  w2 ")
	c.keys("Down")
	c.waitScreen("w2 selected", func(s string) bool { return strings.Contains(s, "▸ w2") })
	c.keys("a")
	c.waitText("y/n")
	c.keys("y")
	c.keys("6")
	c.waitText("console: fleet apply")
	if b, err := os.ReadFile(filepath.Join(ae.Dir, "bye.txt")); err != nil || string(b) != "bye\n" {
		t.Errorf("after apply the work tree's bye.txt is %q (%v)", b, err)
	}
	// Pause dispatch.
	c.submit("/pause")
	c.waitText("DISPATCH PAUSED")

	// The other fleet, and its question.
	c.keys("]")
	c.waitText("fleet shell")
	c.submit(`$ echo '::ask::{"question":"Which colour?","choices":[{"label":"Red","value":"red"},{"label":"Blue","value":"blue"}]}'; read x; echo "picked $x"`)
	c.waitText("waiting — press 5")
	c.keys("r")
	c.waitText("oldest first")
	c.waitText("Which colour?")
	c.keys("2")
	c.waitText("no requests waiting")
	c.keys("1")
	c.waitText("▸ w1") // the table has the worker (fleetState comes once a second)
	c.keys("Enter")
	c.waitText("following") // the transcript, not the table's panel
	c.waitText("picked blue")
	c.keys("Escape")
	c.waitText("enter transcript")
	// A confirm, shown in full, approved with y.
	c.submit(`$ echo '::confirm::rotate the staging keys now?'; read a; echo "rotate said $a"`)
	c.keys("r")
	c.waitText("oldest first")
	c.waitText("rotate the staging keys now?")
	c.keys("y")
	c.waitText("no requests waiting")
	c.keys("1")
	c.waitText("enter transcript")
	c.waitText("  w2 ") // its row is in the table
	c.keys("Down")
	c.waitScreen("w2 selected", func(s string) bool { return strings.Contains(s, "▸ w2") })
	c.keys("Enter")
	c.waitText("following")
	c.waitText("rotate said yes")
	c.keys("Escape")
	c.waitText("enter transcript")

	// The shell fleet restarts (same session): the console follows it and
	// the history comes back once, through the replay.
	session := sessionOf(t, shell)
	shell.Stop()
	c.waitText("RECONNECTING")
	shell2 := le.Start("--control-socket", "--name", "shell", "--resume", session)
	c.waitScreen("re-attached", func(s string) bool {
		return strings.Contains(s, "fleet shell") && !strings.Contains(s, "RECONNECTING")
	})
	c.keys("6")
	s := c.waitText("colour?")
	if n := strings.Count(s, "$ echo '::ask::"); n != 1 {
		t.Errorf("after the restart the prompt shows %d times, want once:\n%s", n, s)
	}
	// Stopped cleanly, so the agent CLIs end with them before the test's
	// folders are removed.
	shell2.Stop()
	agents.Stop()
}

// sessionOf reads the session id from a fleet's log.
func sessionOf(t *testing.T, d *e2etest.Daemon) string {
	t.Helper()
	for _, kv := range strings.Fields(d.Stderr.String()) {
		if s, ok := strings.CutPrefix(kv, "session="); ok {
			return s
		}
	}
	t.Fatalf("no session id in the fleet's log:\n%s", d.Stderr)
	return ""
}

// interrupt stops d as Ctrl-C in its terminal would (SIGINT) and waits for
// a clean exit.
func interrupt(t *testing.T, d *e2etest.Daemon) {
	t.Helper()
	d.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.Done:
		if d.Err != nil {
			t.Fatalf("fleet exited with %v\n%s", d.Err, d.Stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("fleet did not stop on SIGINT\n%s", d.Stderr)
	}
}

// repoEnv is a fleet home and a git repository named repo3 to run in.
func repoEnv(t *testing.T) *e2etest.Env {
	t.Helper()
	e := e2etest.NewEnv(t)
	e.Dir = filepath.Join(t.TempDir(), "repo3")
	if err := os.Mkdir(e.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.GitRepo()
	return e
}

// TestConsoleDiffPaneInTmux: a prompt sent from the prompt line gives the
// keys back (a view key right after Enter switches the view), and d on a
// worker shows its diff in the Workers view, scrollable, esc back to the
// table.
func TestConsoleDiffPaneInTmux(t *testing.T) {
	e := repoEnv(t)
	f := e.Start("--control-socket")
	c := startConsole(t, e, 100, 30)
	c.waitText("fleet repo3")
	c.submit("$ printf 'hello\\n' > hello.txt")
	c.keys("6") // the keys are the views' again: 6 is the Conversation
	c.waitText("you: $ printf")
	c.keys("1")
	c.waitScreen("w1 completed", func(s string) bool { return strings.Contains(s, "▸ w1") && strings.Contains(s, "completed") })
	c.keys("d")
	scr := c.waitScreen("the diff pane", func(s string) bool {
		return strings.Contains(s, "w1 · diff") && strings.Contains(s, "+hello")
	})
	for _, want := range []string{"diff --git a/hello.txt b/hello.txt", "@@ -0,0 +1 @@", "esc back"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the diff pane lacks %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, "NAME") {
		t.Errorf("the diff pane shows the table too:\n%s", scr)
	}
	c.keys("Escape")
	c.waitText("enter transcript")
	interrupt(t, f)
}

// TestConsoleFollowsRestartedFleetInTmux: the console attached to a fleet
// follows it when it is stopped (SIGINT) and a new fleet starts in the
// same repository, without --resume (a new session) and with it (the same
// session, its history shown once). In between it shows the stopped fleet
// as stopped, not another fleet it is not attached to, and it says how
// long it took from the new fleet's descriptor to the console showing it
// attached.
func TestConsoleFollowsRestartedFleetInTmux(t *testing.T) {
	e := repoEnv(t)
	// Another fleet, elsewhere, listed first.
	oe := &e2etest.Env{T: t, Home: e.Home, Dir: t.TempDir()}
	other := oe.Start("--control-socket", "--name", "other")
	f := e.Start("--control-socket")
	c := startConsole(t, e, 100, 30, "repo3")
	sid := sessionOf(t, f)
	c.waitText("session " + sid[:8])

	stopped := func() {
		t.Helper()
		interrupt(t, f)
		c.waitScreen("the stopped fleet shown as stopped", func(s string) bool {
			return strings.Contains(s, "fleet repo3") && strings.Contains(s, "RECONNECTING") &&
				strings.Contains(s, "the fleet stopped; waiting for it to start again") && !strings.Contains(s, "fleet other")
		})
	}
	attached := func(what, sid string) time.Duration {
		t.Helper()
		registered := time.Now() // start returned: the descriptor is there
		c.waitScreen(what, func(s string) bool {
			return strings.Contains(s, "fleet repo3") && strings.Contains(s, "session "+sid[:8]) && !strings.Contains(s, "CONNECTING")
		})
		return time.Since(registered)
	}

	// Stopped, and a new fleet without --resume: a new session.
	stopped()
	f = e.Start("--control-socket")
	sid2 := sessionOf(t, f)
	took := attached("the new fleet attached", sid2)
	t.Logf("new fleet (no --resume): attached %v after its descriptor appeared", took)

	c.submit("$ echo resumed-history-marker")
	c.keys("6")
	c.waitText("resumed-history-marker")
	c.keys("1")

	// Stopped, and started again with --resume: the same session.
	stopped()
	f = e.Start("--control-socket", "--resume", sid2)
	took2 := attached("the resumed fleet attached", sid2)
	t.Logf("resumed fleet: attached %v after its descriptor appeared", took2)
	c.keys("6")
	s := c.waitText("Resumed session " + sid2)
	if n := strings.Count(s, ": $ echo resumed-history-marker"); n != 1 {
		t.Errorf("after the restart the prompt shows %d times, want once:\n%s", n, s)
	}
	for _, d := range []time.Duration{took, took2} {
		if d > followBound {
			t.Errorf("attached %v after the descriptor appeared, want under %v", d, followBound)
		}
	}
	interrupt(t, f)
	interrupt(t, other)
}

// followBound is how soon the console attaches a restarted fleet once its
// descriptor is there (docs/console.md).
const followBound = 5 * time.Second
