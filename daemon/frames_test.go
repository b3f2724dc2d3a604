package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// inProcessFleet runs a whole fleet (engine, journal, SQLite store,
// control socket) in this process, as `fleet run --control-socket` would.
type inProcessFleet struct {
	home string
	desc registry.Descriptor
	stop func()
}

// startInProcess starts a fleet with the local provider in a fresh home;
// each of with changes its options first.
func startInProcess(tb testing.TB, with ...func(*Options)) *inProcessFleet {
	tb.Helper()
	home, err := os.MkdirTemp("", "fd") // short: the socket path must fit sun_path
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(home) })
	tb.Setenv(config.EnvRegistryDir, filepath.Join(home, "sockets"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs bytes.Buffer
	o := Options{Home: home, Cwd: tb.TempDir(), Name: "frames",
		Switches: config.Switches{ControlSocket: true, Workers: 2}, Stdout: &bytes.Buffer{}, Stderr: &syncWriter{w: &logs}}
	for _, f := range with {
		f(&o)
	}
	go func() { done <- Run(ctx, o) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				tb.Errorf("fleet: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("the fleet did not stop")
		}
	}
	tb.Cleanup(stop)
	var live []registry.Entry
	testwait.For(tb, testwait.Bound, "the fleet to register", func() bool {
		if live, _ = registry.Live(config.RegistryDir(home)); len(live) == 1 {
			return true
		}
		select {
		case err := <-done:
			tb.Fatalf("the fleet exited: %v", err)
		default:
		}
		return false
	})
	return &inProcessFleet{home: home, desc: live[0].Descriptor, stop: stop}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (f *inProcessFleet) dial(tb testing.TB, name string) *client.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, f.desc, client.Options{ClientKind: protocol.ClientOther, ClientName: name})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// next reads a frame within 30 s and requires it whole: under the frame
// cap (the client's reader refuses more), decoded, no entry skipped.
func next(c *client.Conn) (protocol.Message, bool, error) {
	m, raw, replay, err := c.Next()
	if err != nil {
		return nil, false, err
	}
	if len(raw) > protocol.MaxFrameSize {
		return nil, false, fmt.Errorf("a %s frame of %d bytes", m.MessageType(), len(raw))
	}
	if n := c.Skipped(); n > 0 {
		return nil, false, fmt.Errorf("%d entries of a %s frame do not match the protocol", n, m.MessageType())
	}
	return m, replay, nil
}

// watcher reads every frame the fleet sends to one console and keeps the
// first one that is not whole.
type watcher struct {
	mu  sync.Mutex
	err error
}

func watchAll(c *client.Conn) *watcher {
	w := &watcher{}
	go func() {
		for {
			if _, _, err := next(c); err != nil {
				w.mu.Lock()
				if w.err == nil && !errors.Is(err, net.ErrClosed) {
					w.err = err
				}
				w.mu.Unlock()
				return
			}
		}
	}()
	return w
}

func (w *watcher) check(tb testing.TB) {
	tb.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		tb.Fatalf("the watching console: %v", w.err)
	}
}

// await reads c until pred holds, failing on a frame that is not whole.
func await(tb testing.TB, c *client.Conn, what string, pred func(protocol.Message) bool) protocol.Message {
	tb.Helper()
	timer := time.AfterFunc(30*time.Second, func() { c.Close() })
	defer timer.Stop()
	for {
		m, _, err := next(c)
		if err != nil {
			tb.Fatalf("waiting for %s: %v", what, err)
		}
		if pred(m) {
			return m
		}
	}
}

// promptOf builds a prompt from the fuzzer's unit: repeated until its
// encoding is about MaxPromptText+delta bytes, delta in [-8128, 63];
// "$ " first when shell. A "$" in unit is replaced, so the prompt is one
// task at most.
func promptOf(unit string, delta int, shell bool) string {
	unit = strings.ReplaceAll(unit, "$", "S")
	if len(unit) > 16 {
		unit = unit[:16]
	}
	if unit == "" || protocol.EncodedLen(unit) == 0 {
		unit = "a"
	}
	target := protocol.MaxPromptText + (delta%8192+8192)%8192 - 8128
	head := ""
	if shell {
		head = "$ : "
	}
	n := max(0, (target-protocol.EncodedLen(head))/protocol.EncodedLen(unit)+1)
	return head + strings.Repeat(unit, n)
}

// FuzzPromptFrames: prompts of any characters around the admission limit
// (protocol.MaxPromptText) are admitted or refused with an error as the
// limit says, and every frame the fleet sends because of them, to a
// console watching all along and in the replay of a console that attaches
// afterwards, is under the frame cap and decodes strictly. Shell prompts
// become planned tasks (plan mode: nothing the fuzzer writes is run).
func FuzzPromptFrames(f *testing.F) {
	fl := startInProcess(f)
	ctl := fl.dial(f, "fuzz-control")
	defer ctl.Close()
	if err := ctl.Send(&protocol.Prompt{Text: "/plan on", RequestID: "plan"}); err != nil {
		f.Fatal(err)
	}
	await(f, ctl, "plan mode", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "Plan mode on")
	})
	watch := fl.dial(f, "fuzz-watch")
	defer watch.Close()
	w := watchAll(watch)

	for _, unit := range []string{`"`, `\`, "\x00", "\x1f", "\u2028", "\xff", "é", "🚀", "a", "\"\\\x01\u2029<&>", "line\n"} {
		for _, delta := range []int{0, 8128, 8128 + 1} {
			f.Add(unit, delta, unit != "\x00" && unit != "line\n")
		}
	}
	i := 0
	f.Fuzz(func(t *testing.T, unit string, delta int, shell bool) {
		text := promptOf(unit, delta, shell)
		i++
		id := fmt.Sprintf("p%d", i)
		c := fl.dial(t, "fuzz")
		defer c.Close()
		if err := c.Send(&protocol.Prompt{Text: text, RequestID: id}); err != nil {
			if errors.Is(err, protocol.ErrFrameTooLarge) {
				return // the client cannot send it; nothing for the fleet to do
			}
			t.Fatal(err)
		}
		// What the fleet receives: each invalid byte arrives as U+FFFD.
		got := validUTF8(text)
		admitted := protocol.CheckPromptText(got) == nil
		m := await(t, c, "the echo or the refusal", func(m protocol.Message) bool {
			switch m := m.(type) {
			case *protocol.UserMessage:
				return m.RequestID == id
			case *protocol.Error:
				return true
			}
			return false
		})
		switch m := m.(type) {
		case *protocol.UserMessage:
			if !admitted || m.Text != got {
				t.Fatalf("echoed a prompt of %d bytes (%d encoded), admitted %v", len(got), protocol.EncodedLen(got), admitted)
			}
			if shell {
				await(t, c, "its task", func(m protocol.Message) bool {
					r, ok := m.(*protocol.Reply)
					return ok && strings.HasPrefix(r.Text, "Queued ")
				})
			}
		case *protocol.Error:
			if admitted || !strings.Contains(m.Message, "over the limit") {
				t.Fatalf("error %q for a prompt of %d bytes encoded", m.Message, protocol.EncodedLen(got))
			}
		}
		// A console attaching now gets a replay it reads whole.
		late := fl.dial(t, "late")
		defer late.Close()
		await(t, late, "replayEnd", func(m protocol.Message) bool { return m.MessageType() == protocol.TypeReplayEnd })
		w.check(t)
	})
}

// validUTF8 is s as JSON carries it: each byte of invalid UTF-8 replaced
// with U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // ranging yields RuneError for each invalid byte
	}
	return b.String()
}
