package agentcli

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long a test waits for what should come at once: generous,
// for a loaded machine under -race.
const bound = 60 * time.Second

// startSh starts sh -c script as a CLI and takes it over.
func startSh(t *testing.T, script string) *Conn {
	t.Helper()
	p, err := Start(Command{Path: "/bin/sh", Args: []string{"-c", script}, Dir: t.TempDir(), Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	return NewConn(p)
}

// read runs c.Read on a goroutine and returns its lines and error, failing
// the test when it does not return within limit.
func read(t *testing.T, c *Conn, max int, limit time.Duration) ([]string, error) {
	t.Helper()
	type result struct {
		lines []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var lines []string
		err := c.Read(max, func(l []byte) { lines = append(lines, string(l)) })
		done <- result{lines, err}
	}()
	select {
	case r := <-done:
		return r.lines, r.err
	case <-time.After(limit):
		c.Kill("the test gave up")
		<-done
		t.Fatalf("Read did not return within %v", limit)
		return nil, nil
	}
}

// A CLI that prints and exits: Read hands over its non-empty lines, then
// the exit status and stderr tell how it ended, and its stdin is closed.
func TestConnRead(t *testing.T) {
	c := startSh(t, `printf 'one\n\r\n\ntwo\r\nlast'; echo 'it broke' >&2; exit 3`)
	lines, err := read(t, c, 1<<20, bound)
	if err != nil || !slices.Equal(lines, []string{"one", "two", "last"}) {
		t.Fatalf("lines %q, err %v", lines, err)
	}
	if got := c.ExitText(); got != "exit status 3" {
		t.Errorf("ExitText = %q", got)
	}
	if got := c.Stderr(); got != "it broke" {
		t.Errorf("Stderr = %q", got)
	}
	if c.Stopped() != "" {
		t.Errorf("Stopped = %q; nobody stopped it", c.Stopped())
	}
	if err := c.Stdin().WriteLine(context.Background(), []byte("x\n")); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("a write after the end = %v", err)
	}
}

// An over-long line is a protocol error: the CLI is killed, whatever it
// was doing, and nothing of its tree is left.
func TestConnOverlongLine(t *testing.T) {
	c := startSh(t, `head -c 5000 /dev/zero | tr '\0' x; echo; sleep 300 & sleep 301`)
	_, err := read(t, c, 1000, bound)
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Read = %v", err)
	}
	if !strings.Contains(c.Stopped(), "a protocol error") || c.ExitText() != "signal: killed" {
		t.Errorf("Stopped %q, ExitText %q", c.Stopped(), c.ExitText())
	}
	if left := c.Process().(*Proc).Alive(); len(left) != 0 {
		t.Errorf("left running: %v", left)
	}
}

// A CLI that closes its stdout but lives on is killed after ExitGrace.
func TestConnOutlivesItsOutput(t *testing.T) {
	c := startSh(t, `exec >&-; sleep 300`)
	start := time.Now()
	if _, err := read(t, c, 1000, bound); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < ExitGrace {
		t.Errorf("Read returned after %v, before the grace", d)
	}
	if c.Stopped() != "it closed its output but did not exit" || c.ExitText() != "signal: killed" {
		t.Errorf("Stopped %q, ExitText %q", c.Stopped(), c.ExitText())
	}
}

// A write to a CLI that does not read fails by its deadline, the ctx's
// when earlier; Close cuts a blocked write short.
func TestWriterDeadlines(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wr := NewWriter(w)
	big := make([]byte, 1<<20) // more than the pipe holds
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := wr.WriteLine(ctx, big); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteLine past its ctx deadline = %v", err)
	}
	if d := time.Since(start); d > WriteTimeout {
		t.Errorf("the ctx deadline did not apply: %v", d)
	}

	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- wr.WriteLine(ctx, big) }()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled write succeeded")
		}
	case <-time.After(bound):
		t.Fatal("cancelling the ctx did not end the write")
	}

	go func() { errc <- wr.WriteLine(context.Background(), big) }()
	time.Sleep(50 * time.Millisecond) // let the write block; Close must end it either way
	wr.Close()
	select {
	case <-errc:
	case <-time.After(bound):
		t.Fatal("Close did not end a blocked write")
	}
	if err := wr.WriteLine(context.Background(), []byte("x\n")); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("a write after Close = %v", err)
	}
}

func TestPrompts(t *testing.T) {
	var p Prompts[string]
	answers := make(chan string, 10)
	answer := func(a string) { answers <- a }

	// Answered: the answer is what ask returned.
	if !p.Go("a", context.Background(), func(context.Context) string { return "yes" }, answer) {
		t.Fatal("Go refused")
	}
	if got := <-answers; got != "yes" {
		t.Fatalf("answer %q", got)
	}

	// Withdrawn: ask's ctx ends, the answer is dropped.
	asked := make(chan struct{})
	p.Go("b", context.Background(), func(ctx context.Context) string {
		close(asked)
		<-ctx.Done()
		return "late"
	}, answer)
	<-asked
	p.Withdraw("b")
	p.Wait()
	select {
	case got := <-answers:
		t.Fatalf("a withdrawn prompt was answered %q", got)
	default:
	}

	// Bounded: past MaxPrompts running, Go refuses; the parent's end ends
	// them all.
	parent, cancel := context.WithCancel(context.Background())
	for i := 0; i < MaxPrompts; i++ {
		if !p.Go("", parent, func(ctx context.Context) string { <-ctx.Done(); return "" }, func(string) {}) {
			t.Fatalf("Go refused prompt %d", i)
		}
	}
	if p.Go("one-more", parent, func(context.Context) string { return "" }, answer) {
		t.Fatal("Go ran a prompt past MaxPrompts")
	}
	cancel()
	p.Wait()
	if !p.Go("after", context.Background(), func(context.Context) string { return "again" }, answer) {
		t.Fatal("Go refused once the prompts ended")
	}
	if got := <-answers; got != "again" {
		t.Fatalf("answer %q", got)
	}
	p.Wait()
}

// Stop closes stdin: a CLI that exits then is not killed; one that does
// not is killed after ExitGrace.
func TestConnStop(t *testing.T) {
	c := startSh(t, `cat >/dev/null`)
	c.Stop()
	if _, err := read(t, c, 1000, bound); err != nil || c.Stopped() != "" || c.ExitText() != "exit status 0" {
		t.Errorf("a CLI that exits on EOF: Read %v, Stopped %q, %s", err, c.Stopped(), c.ExitText())
	}

	c = startSh(t, `exec sleep 300 </dev/null`)
	start := time.Now()
	c.Stop()
	if d := time.Since(start); d < ExitGrace {
		t.Errorf("Stop returned after %v, before the grace", d)
	}
	if _, err := read(t, c, 1000, bound); err != nil || c.Stopped() != "it did not exit when its input was closed" || c.ExitText() != "signal: killed" {
		t.Errorf("a CLI that ignores EOF: Read %v, Stopped %q, %s", err, c.Stopped(), c.ExitText())
	}
}

// echoProcess is a Process that is not a local command: a goroutine that
// echoes each stdin line to stdout, the way a remote session's pipes
// would carry a CLI's.
type echoProcess struct {
	inR, inW, outR, outW, errR, errW *os.File
	killed                           chan struct{}
	once                             sync.Once
	done                             chan struct{}
}

func newEchoProcess(t *testing.T) *echoProcess {
	var fs [6]*os.File
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		fs[i], fs[i+1] = r, w
	}
	p := &echoProcess{inR: fs[0], inW: fs[1], outR: fs[2], outW: fs[3], errR: fs[4], errW: fs[5], killed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer p.outW.Close()
		defer p.errW.Close()
		lr := NewLineReader(p.inR, 1<<10)
		for {
			l, err := lr.Next()
			if err != nil {
				return
			}
			p.outW.Write(append(l, '\n'))
		}
	}()
	return p
}

func (p *echoProcess) Stdin() Input          { return p.inW }
func (p *echoProcess) Stdout() io.ReadCloser { return p.outR }
func (p *echoProcess) Stderr() io.ReadCloser { return p.errR }
func (p *echoProcess) Kill()                 { p.once.Do(func() { close(p.killed); p.inR.Close() }) }

func (p *echoProcess) Wait() error {
	<-p.done
	select {
	case <-p.killed:
		return errors.New("killed")
	default:
		return nil
	}
}

// A Conn runs on any Process: lines go out through its stdin and come
// back through its stdout, and Stop ends it.
func TestConnOverAnyProcess(t *testing.T) {
	p := newEchoProcess(t)
	cli := &CLI{Launcher: func(context.Context, Command) (Process, error) { return p, nil }}
	proc, err := cli.Launch(context.Background(), Command{Path: "elsewhere"})
	if err != nil || proc != Process(p) {
		t.Fatalf("Launch = %v, %v", proc, err)
	}
	c := NewConn(proc)
	got := make(chan string, 2)
	done := make(chan error, 1)
	go func() { done <- c.Read(1<<10, func(l []byte) { got <- string(l) }) }()
	if err := c.Stdin().WriteJSON(context.Background(), map[string]string{"hello": "there"}); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l != `{"hello":"there"}` {
			t.Fatalf("echoed %q", l)
		}
	case <-time.After(bound):
		t.Fatal("no echo")
	}
	c.Stop()
	if err := <-done; err != nil || c.ExitText() != "exit status 0" || c.Stopped() != "" {
		t.Errorf("Read %v, ExitText %q, Stopped %q", err, c.ExitText(), c.Stopped())
	}
}
