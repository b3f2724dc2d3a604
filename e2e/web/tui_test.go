//go:build linux

package web

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"

	"github.com/agents-fleet/fleet/e2e/e2etest"
)

// tui is `fleet console` on a pseudo-terminal: the second console of the
// tests that need one, as an operator runs it.
type tui struct {
	t   *testing.T
	pty *os.File

	mu  sync.Mutex
	raw bytes.Buffer
}

func startTUI(t *testing.T, e *env) *tui {
	t.Helper()
	cmd := exec.Command(e2etest.Bin(), "console")
	cmd.Dir = e.cwd
	cmd.Env = append(os.Environ(), "AGENTS_FLEET_HOME="+e.home, "TERM=xterm-256color")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 140})
	if err != nil {
		t.Fatalf("start fleet console on a pty: %v", err)
	}
	c := &tui{t: t, pty: f}
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			c.mu.Lock()
			c.raw.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
		<-read
	})
	return c
}

func (c *tui) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ansi.Strip(c.raw.String())
}

// expect waits for every one of wants on the console's screen.
func (c *tui) expect(what string, wants ...string) {
	c.t.Helper()
	testwait(c.t, what, func() bool {
		text := c.text()
		for _, w := range wants {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
}

func (c *tui) keys(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.pty, s); err != nil {
		c.t.Fatalf("type %q: %v", s, err)
	}
}
