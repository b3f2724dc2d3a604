//go:build unix

package e2e

// `fleet run` on a pty it has as its controlling terminal, in a session of
// its own, as a shell starts it: Unix-only (setsid, TIOCSCTTY, and Ctrl-C
// signals the terminal's foreground process group).

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/protocol"
)

// ptyFleet is a `fleet run` whose terminal is a pty the test types into.
type ptyFleet struct {
	*e2etest.Daemon
	e      *e2etest.Env
	ptmx   *os.File
	out    *ptyOutput
	cursor int // offset in the visible text where the next expect starts
}

// startPty runs `fleet run args...` on a fresh 40x120 pty in e and waits for
// its descriptor when it has a control socket.
func startPty(e *e2etest.Env, args ...string) *ptyFleet {
	t := e.T
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		ptmx.Close()
		tty.Close()
		t.Fatal(err)
	}
	cmd := exec.Command(e2etest.Bin(), append([]string{"run"}, args...)...)
	cmd.Dir = e.Dir
	cmd.Env = e.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// A session of its own with the pty as controlling terminal, so that
	// Ctrl-C on the pty signals the fleet's (foreground) process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	p := &ptyFleet{e: e, ptmx: ptmx, out: &ptyOutput{changed: make(chan struct{})}}
	p.Daemon = &e2etest.Daemon{T: t, Cmd: cmd, Stderr: &e2etest.Buffer{}, Done: make(chan struct{})}
	err = cmd.Start()
	tty.Close() // the child has its own copies; EOF (EIO) once it is gone
	if err != nil {
		ptmx.Close()
		t.Fatal(err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		io.Copy(io.MultiWriter(p.out, p.Stderr), ptmx)
	}()
	track(p.Daemon)
	t.Cleanup(func() {
		terminate(p.Daemon)
		ptmx.Close()
		<-readerDone
	})
	if slices.Contains(args, "--control-socket") {
		e.WaitRegistered(p.Daemon)
	}
	return p
}

// waitExit waits for the process to exit and returns its exit error.
func waitExit(d *e2etest.Daemon) error {
	d.T.Helper()
	select {
	case <-d.Done:
		return d.Err
	case <-time.After(ptyWait):
		d.T.Fatalf("fleet did not exit within %s\n%s", ptyWait, d.Stderr)
		return nil
	}
}

// send types line and Enter.
func (p *ptyFleet) send(line string) {
	p.T.Helper()
	if _, err := p.ptmx.Write([]byte(line + "\r")); err != nil {
		p.T.Fatalf("typing %q: %v", line, err)
	}
}

// text is everything visible on the terminal so far.
func (p *ptyFleet) text() string {
	s, _ := p.out.snapshot()
	return s
}

// expectRe waits for re to match the visible text after the cursor, moves
// the cursor past the match and returns the submatches.
func (p *ptyFleet) expectRe(expr string) []string {
	p.T.Helper()
	re := regexp.MustCompile(expr)
	timeout := time.NewTimer(ptyWait)
	defer timeout.Stop()
	for {
		text, changed := p.out.snapshot()
		if loc := re.FindStringSubmatchIndex(text[p.cursor:]); loc != nil {
			var sub []string
			for i := 0; i < len(loc); i += 2 {
				if loc[i] < 0 {
					sub = append(sub, "")
				} else {
					sub = append(sub, text[p.cursor+loc[i]:p.cursor+loc[i+1]])
				}
			}
			p.cursor += loc[1]
			return sub
		}
		select {
		case <-changed:
		case <-timeout.C:
			p.T.Fatalf("terminal: no %q within %s; after the last match it shows:\n%s", expr, ptyWait, text[p.cursor:])
		}
	}
}

// expect waits for the literal s after the cursor and moves past it.
func (p *ptyFleet) expect(s string) { p.T.Helper(); p.expectRe(regexp.QuoteMeta(s)) }

// expectAll waits until every string appears after the cursor, in any
// order, and moves past the last of them.
func (p *ptyFleet) expectAll(ss ...string) {
	p.T.Helper()
	start, end := p.cursor, p.cursor
	for _, s := range ss {
		p.cursor = start
		p.expect(s)
		end = max(end, p.cursor)
	}
	p.cursor = end
}

// banner waits for the console's attach banner and hint.
func (p *ptyFleet) banner() {
	p.T.Helper()
	p.expect("attached: session " + filepath.Base(p.e.Dir) + ", model local, in " + p.e.Dir)
	p.expect("type a prompt; local commands: /yes /no /answer /pending /status /quit")
}

// quit types /quit and requires a clean exit.
func (p *ptyFleet) quit() {
	p.T.Helper()
	p.send("/quit")
	if err := waitExit(p.Daemon); err != nil {
		p.T.Fatalf("fleet exited with %v after /quit\n%s", err, p.text())
	}
}

// waitClosed waits for the fleet to close the stream's connection.
func waitClosed(s *e2etest.Stream) {
	s.T.Helper()
	timeout := time.After(ptyWait)
	for {
		select {
		case _, ok := <-s.Frames:
			if !ok {
				return
			}
		case <-timeout:
			s.T.Fatal("the fleet did not close the connection")
		}
	}
}

func TestPtyInteractiveConsole(t *testing.T) {
	e := e2etest.NewEnv(t)
	p := startPty(e, "--control-socket")
	// A socket client for the command catalog /help must list.
	s := e2etest.Watch(t, p.Dial(protocol.ClientOther, "catalog"))
	catalog := s.WaitFor("commandCatalog", e2etest.IsType(protocol.TypeCommandCatalog)).(*protocol.CommandCatalog)
	if len(catalog.Commands) == 0 {
		t.Fatal("empty command catalog")
	}
	p.banner()

	p.send("$ echo hello-pty")
	p.expect("you: $ echo hello-pty")
	p.expect("[w1] hello-pty")
	p.expectRe(`• w1 completed: t1 done in \S+`)

	p.send("/help")
	p.expect("you: /help")
	p.expect(`fleet: Start a task with a line beginning "$ "`)
	p.expect("Commands:")
	for _, c := range catalog.Commands { // in catalog order, one line each
		p.expectRe(`(?m)^ +` + regexp.QuoteMeta(c.Name) + `( .*)? +\S.*$`)
	}

	p.send("/tasks")
	p.expect("you: /tasks")
	p.expect("fleet: 1 tasks: 1 done, 0 failed, 0 running, 0 blocked, 0 pending")
	p.expectRe(`(?m)^ +t1 +done +w1 +echo hello-pty$`)

	// The console's own prompts are shown once, as "you:", not echoed back.
	text := p.text()
	if n := strings.Count(text, "you: $ echo hello-pty"); n != 1 {
		t.Errorf("prompt shown %d times as typed", n)
	}
	if strings.Contains(text, "terminal: $ echo hello-pty") {
		t.Error("the fleet's echo of the terminal's own prompt was printed")
	}
	p.quit()
}

func TestPtyTerminalAnswerSupersedesForSocketClients(t *testing.T) {
	e := e2etest.NewEnv(t)
	p := startPty(e, "--control-socket")
	c := p.Dial(protocol.ClientREPL, "sock")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	p.banner()

	const task = `$ echo '::confirm::Ship it?'; read ok; echo "read $ok"`
	if _, err := c.Prompt(task); err != nil {
		t.Fatal(err)
	}
	req := s.WaitFor("confirmRequest", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	p.expect("sock: " + task)
	p.expect("? [" + req.ID + "] Ship it? (/yes or /no)")

	p.send("/yes")
	p.expect("answering " + req.ID + ": yes")
	res := s.WaitFor("confirmResolved", e2etest.IsType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != req.ID || res.Kind != protocol.KindConfirm || res.Reason != protocol.ReasonSuperseded || !res.Approved {
		t.Fatalf("socket client got %+v, want %s superseded and approved", res, req.ID)
	}
	s.WaitFor("the task reading yes", e2etest.TranscriptIs("w1", "read yes"))
	// For the terminal that answered, the request was simply answered.
	p.expectAll("✓ "+req.ID+" answered (approved)", "[w1] read yes")
	if strings.Contains(p.text(), "superseded") {
		t.Errorf("the terminal shows its own answer as superseded:\n%s", p.text())
	}
	p.quit()
}

func TestPtySocketAnswerDismissesTerminalPrompt(t *testing.T) {
	e := e2etest.NewEnv(t)
	p := startPty(e, "--control-socket")
	c := p.Dial(protocol.ClientBot, "bot")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	p.banner()

	if _, err := c.Prompt(`$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "env=$env"`); err != nil {
		t.Fatal(err)
	}
	ask := s.WaitFor("askRequest", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	question := "? [" + ask.ID + "] Which env? choices: 1) staging 2) prod (/answer <n>)"
	p.expect(question)
	p.send("/pending")
	p.expect(question) // listed while it waits

	if err := c.Answer(ask.ID, "prod"); err != nil {
		t.Fatal(err)
	}
	res := s.WaitFor("confirmResolved", e2etest.IsType(protocol.TypeConfirmResolved)).(*protocol.ConfirmResolved)
	if res.ID != ask.ID || res.Kind != protocol.KindAsk || res.Reason != protocol.ReasonAnswered {
		t.Fatalf("resolved %+v", res)
	}
	p.expectAll("✓ "+ask.ID+" answered", "[w1] env=prod")

	p.send("/pending")
	p.expect("no pending requests")
	p.send("/answer 1")
	p.expect("no pending question")
	p.quit()
}

func TestPtyQuitShutsDownCleanly(t *testing.T) {
	e := e2etest.NewEnv(t)
	p := startPty(e, "--control-socket")
	logPath := p.expectRe(`fleet: logging to (` + regexp.QuoteMeta(filepath.Join(e.Home, "logs")) + `/[0-9a-f]+\.log)`)[1]
	c := p.Dial(protocol.ClientOther, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	p.banner()
	for _, f := range files(p.Daemon, e) {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("while running: %v", err)
		}
	}

	p.quit()
	requireFilesGone(p.Daemon, e)
	waitClosed(s)
	// In a terminal the logs go to the file, not to the screen.
	log, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(log), "fleet listening") {
		t.Errorf("log file %s: %v\n%s", logPath, err, log)
	}
	if strings.Contains(p.text(), "fleet listening") {
		t.Errorf("log lines on the terminal:\n%s", p.text())
	}
}

func TestPtyCtrlCShutsDownCleanly(t *testing.T) {
	e := e2etest.NewEnv(t)
	p := startPty(e, "--control-socket")
	c := p.Dial(protocol.ClientREPL, "watcher")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	p.banner()

	// The task reports its pid, then becomes `sleep 60` under that pid.
	p.send(`$ echo pid=$$; exec sleep 60`)
	tr := s.WaitFor("the task's pid", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && strings.HasPrefix(tr.Text, "pid=")
	}).(*protocol.Transcript)
	pid, err := strconv.Atoi(strings.TrimPrefix(tr.Text, "pid="))
	if err != nil {
		t.Fatal(err)
	}
	p.expect("[w1] pid=")

	if _, err := p.ptmx.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	failed := s.WaitFor("the task failing", e2etest.HubIs("w1", "failed")).(*protocol.HubEvent)
	if !strings.Contains(failed.Text, "t1 failed") || !strings.Contains(failed.Text, "shutting down") {
		t.Errorf("failed event %q", failed.Text)
	}
	if err := waitExit(p.Daemon); err != nil {
		t.Fatalf("fleet exited with %v after Ctrl-C\n%s", err, p.text())
	}
	requireFilesGone(p.Daemon, e)
	waitClosed(s)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the task's sleep (pid %d) outlived the fleet: %v", pid, err)
	}
}
