package agentcli

import (
	"errors"
	"io"
	"os/exec"
	"sync"
	"time"
)

// Bounds of a Conn's end. Each wait on the CLI has one.
const (
	// ExitGrace is how long a CLI may live on after it closed its stdout,
	// or after its stdin was closed, before it is killed.
	ExitGrace = 3 * time.Second
	// DrainGrace is how long stderr may stay open after the CLI and its
	// tree are gone (a process outside the tree may hold it).
	DrainGrace = 2 * time.Second
)

// Conn is a session's hold on a running CLI: it reaps the Process (ending
// what the CLI left running as it goes), keeps the tail of its stderr,
// reads its stdout as lines (Read), writes its stdin (Stdin) and says how
// it ended. It owns two goroutines, the reaper and the stderr reader; both
// end once the CLI has exited and its stderr closed, which Read makes sure
// of.
type Conn struct {
	p    Process
	in   *Writer
	tail Tail

	exited     chan struct{} // closed once the CLI was reaped and its tree killed
	waitErr    error         // Wait's error; written before exited is closed
	stderrDone chan struct{}

	mu      sync.Mutex
	stopped string // why the adapter killed the CLI, when it did
}

// NewConn takes over p: it starts reaping it and reading its stderr.
func NewConn(p Process) *Conn {
	c := &Conn{
		p:          p,
		in:         NewWriter(p.Stdin()),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	go c.reap()
	go c.readStderr()
	return c
}

func (c *Conn) reap() {
	err := c.p.Wait()
	// Whatever the CLI started goes with it, however it detached.
	c.p.Kill()
	c.waitErr = err
	close(c.exited)
}

func (c *Conn) readStderr() {
	defer close(c.stderrDone)
	buf := make([]byte, 4<<10)
	_, _ = io.CopyBuffer(&c.tail, c.p.Stderr(), buf)
}

// Process is the process the Conn runs on.
func (c *Conn) Process() Process { return c.p }

// Stdin is the CLI's input.
func (c *Conn) Stdin() *Writer { return c.in }

// Read reads the CLI's stdout until it ends, handing handle each
// non-empty line (without its newline; valid until handle returns). A
// line over max bytes is a protocol error: the stream cannot be
// resynchronised. Then it ends the CLI's side: a read error kills the
// CLI; a CLI that closed its stdout but lives on is killed after
// ExitGrace; stderr is drained (DrainGrace) and the pipes are closed. It
// returns nil at EOF, else the read error (wrapping ErrLineTooLong for an
// over-long line). It is called once, on the goroutine that owns the
// session's stream.
func (c *Conn) Read(max int, handle func(line []byte)) error {
	lr := NewLineReader(c.p.Stdout(), max)
	var err error
	for {
		var line []byte
		if line, err = lr.Next(); err != nil {
			break
		}
		if len(line) > 0 {
			handle(line)
		}
	}
	if err == io.EOF {
		err = nil
	}
	c.end(err)
	return err
}

func (c *Conn) end(readErr error) {
	if readErr != nil {
		why := "reading its output failed: " + readErr.Error()
		if errors.Is(readErr, ErrLineTooLong) {
			why = readErr.Error() + " (a protocol error); the adapter stopped it"
		}
		c.Kill(why)
	}
	c.awaitExit("it closed its output but did not exit")
	drain := time.NewTimer(DrainGrace)
	defer drain.Stop()
	select {
	case <-c.stderrDone:
	case <-drain.C:
		_ = c.p.Stderr().Close() // a stray holder keeps it open: stop reading
		<-c.stderrDone
	}
	_ = c.p.Stdout().Close()
	_ = c.p.Stderr().Close()
	c.in.Close()
}

// Stop ends the CLI the gentle way: it closes its stdin, which asks an
// idle CLI to exit, and kills it when it has not exited ExitGrace later.
// It returns once the CLI exited.
func (c *Conn) Stop() {
	c.in.Close()
	c.awaitExit("it did not exit when its input was closed")
}

// awaitExit waits ExitGrace for the CLI to exit, then kills it for why.
func (c *Conn) awaitExit(why string) {
	t := time.NewTimer(ExitGrace)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		c.Kill(why)
		<-c.exited
	}
}

// Kill ends the CLI and everything it started; why, when set, is the
// first reason the adapter had (Stopped).
func (c *Conn) Kill(why string) {
	if why != "" {
		c.mu.Lock()
		if c.stopped == "" {
			c.stopped = why
		}
		c.mu.Unlock()
	}
	c.p.Kill()
}

// Stopped is why the adapter killed the CLI; "" when it did not.
func (c *Conn) Stopped() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// Exited is closed once the CLI was reaped and what it left running was
// killed.
func (c *Conn) Exited() <-chan struct{} { return c.exited }

// ExitErr is the Process's Wait error. Only call it once Exited is
// closed.
func (c *Conn) ExitErr() error { return c.waitErr }

// ExitText says how the CLI ended: "exit status 3", "signal: killed".
// Only call it once Exited is closed.
func (c *Conn) ExitText() string {
	var ee *exec.ExitError
	switch {
	case c.waitErr == nil:
		return "exit status 0"
	case errors.As(c.waitErr, &ee):
		return ee.String()
	}
	return c.waitErr.Error()
}

// StderrDone is closed once the CLI's stderr ended (or Read gave up
// waiting for it).
func (c *Conn) StderrDone() <-chan struct{} { return c.stderrDone }

// Stderr is the tail of what the CLI printed on stderr so far, trimmed.
func (c *Conn) Stderr() string { return c.tail.String() }
