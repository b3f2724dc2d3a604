//go:build linux

package wine

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// terminal is fleet.exe console running under Wine on a pseudo-terminal,
// as in a Windows terminal: Wine's console turns the keys typed into
// console input and passes the TUI's escape sequences through.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	pty  *os.File
	done chan struct{} // closed once Wait returned
	err  error

	mu  sync.Mutex
	raw bytes.Buffer // everything the console wrote
}

func (h *host) console(t *testing.T, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(wineExec, append([]string{fleetExe, "console"}, args...)...)
	cmd.Dir, cmd.Env = h.cwd, append(h.environ(), "TERM=xterm-256color")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatalf("start fleet.exe console on a pty: %v", err)
	}
	c := &terminal{t: t, cmd: cmd, pty: f, done: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			c.mu.Lock()
			c.raw.Write(buf[:n])
			c.mu.Unlock()
			if err != nil { // EIO once the console and Wine closed it
				return
			}
		}
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			cmd.Process.Kill()
			<-c.done
		}
		f.Close()
		<-read
		if t.Failed() {
			t.Logf("the console's screen, escapes stripped:\n%s", tail(c.text(0)))
		}
	})
	return c
}

// mark is where the console's output is now: expect looks after it.
func (c *terminal) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw.Len()
}

// text is what the console wrote after mark, its escape sequences removed.
func (c *terminal) text(mark int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ansi.Strip(string(c.raw.Bytes()[mark:]))
}

// expect waits for every one of wants in what the console wrote after mark.
func (c *terminal) expect(mark int, what string, wants ...string) {
	c.t.Helper()
	testwait.For(c.t, wineBound, what, func() bool {
		text := c.text(mark)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
}

// keys types s; a key at a time when one says so, since several runes
// arriving at once are a paste (which the TUI takes only into a text line).
func (c *terminal) keys(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.pty, s); err != nil {
		c.t.Fatalf("type %q: %v", s, err)
	}
}

// TestConsoleUnderWine: fleet.exe console, in a Windows console, attaches
// to the only fleet, sends a prompt typed into it, shows the worker's task
// done, switches views by key and quits cleanly with q (the terminal given
// back: the alternate screen left).
func TestConsoleUnderWine(t *testing.T) {
	h := newHost(t)
	h.startFleet(t)
	c := h.console(t)
	c.expect(0, "the console's first screen", "fleet ", "1 Workers", "press : to type a prompt")

	m := c.mark()
	c.keys(":")
	c.keys("$ echo wine-hello")
	c.expect(m, "the prompt typed", "wine-hello")
	m = c.mark()
	c.keys("\r")
	c.expect(m, "the worker done in the workers view", "sent: $ echo wine-hello", "completed")

	m = c.mark()
	c.keys("2")
	c.expect(m, "the tasks view", "1 tasks", "1 done", "echo wine-hello")

	m = c.mark()
	c.keys("q")
	select {
	case <-c.done:
	case <-time.After(wineBound):
		t.Fatalf("fleet.exe console did not end within %v of q", wineBound)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("fleet.exe console exited %d after q (%v)", code, c.err)
	}
	c.mu.Lock()
	left := bytes.Contains(c.raw.Bytes()[m:], []byte("\x1b[?1049l"))
	c.mu.Unlock()
	if !left {
		t.Fatalf("the console quit without leaving the alternate screen")
	}
}
