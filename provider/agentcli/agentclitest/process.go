package agentclitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
)

// FakeCLI writes script, a shell script standing in for the CLI called
// name, as an executable in a temp dir and returns its path. The fake
// tests use it so that each failure happens exactly where they want it.
func FakeCLI(t testing.TB, name, script string) string {
	t.Helper()
	if !strings.HasPrefix(script, "#!") {
		script = "#!/bin/sh\n" + script
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitDone waits for a session's end, or fails the test after bound.
func WaitDone(t testing.TB, s interface{ Done() <-chan struct{} }, bound time.Duration) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(bound):
		t.Fatalf("the session did not end within %v", bound)
	}
}

// Eventually polls cond until it holds, or fails the test after bound:
// for what nothing signals (a process in /proc, a file).
func Eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, bound, what, cond)
}

// WaitGone waits until alive reports no process, or fails the test with
// the command lines of those left.
func WaitGone(t testing.TB, bound time.Duration, alive func() []int) {
	t.Helper()
	var left []int
	if !testwait.Until(bound, func() bool { left = alive(); return len(left) == 0 }) {
		t.Fatalf("processes still alive after %v: %v (%s)", bound, left, Cmdlines(left))
	}
}

// Cmdlines is the pids' command lines (Linux), "; "-separated.
func Cmdlines(pids []int) string {
	var parts []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return strings.Join(parts, "; ")
}

// Start starts a session of p, bounded by Wait, and closes it at the
// test's end.
func Start(t testing.TB, p provider.Provider, spec provider.Spec, h provider.Host) provider.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	s, err := p.Start(ctx, spec, h)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Send sends a turn of text, bounded by Wait.
func Send(t testing.TB, s provider.Session, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := s.Send(ctx, provider.Turn{Text: text}); err != nil {
		t.Fatalf("Send(%q): %v", text, err)
	}
}

// NullInput is a CLI's stdin that takes every write and keeps nothing,
// for sessions without a process that tests feed lines to.
type NullInput struct{}

func (NullInput) Write(p []byte) (int, error)      { return len(p), nil }
func (NullInput) Close() error                     { return nil }
func (NullInput) SetWriteDeadline(time.Time) error { return nil }

// Proc is the local process a session's Conn runs on.
func Proc(c *agentcli.Conn) *agentcli.Proc { return c.Process().(*agentcli.Proc) }

// Alive lists the live processes of a session's process tree.
func Alive(c *agentcli.Conn) []int { return Proc(c).Alive() }

// BigLine is a fake CLI's shell lines that print one line: prefix, n
// bytes of 'a', suffix. The prefix and suffix hold no single quote.
func BigLine(prefix string, n int, suffix string) string {
	return "printf '%s' '" + prefix + "'\nhead -c " + strconv.Itoa(n) + " /dev/zero | tr '\\0' a\nprintf '%s\\n' '" + suffix + "'\n"
}

// Opaque is a Launcher that starts the command here but hands back only a
// Process, as a launcher for another machine would: a session must run on
// it without the local extras (the turn sweeps).
func Opaque(_ context.Context, c agentcli.Command) (agentcli.Process, error) {
	p, err := agentcli.Start(c)
	if err != nil {
		return nil, err
	}
	return struct{ agentcli.Process }{p}, nil
}
