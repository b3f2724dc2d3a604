// Package local is the embedded provider: each task is a shell command run
// in the worker's directory, with `sh -c` (a command too long for an
// argument is run from a private script file), or on Windows with
// `cmd /c` or PowerShell (Provider.Shell; shell_windows.go says how the
// command reaches them verbatim). Its output lines become transcript lines,
// the command is one "shell" tool call, and two workflow lines let a
// script talk to the operator:
//
//	::ask::{"question":"Which env?","choices":["staging","prod"]}
//	::confirm::Deploy to prod?
//
// The answer (or "yes"/"no") and a newline (CR LF for cmd and PowerShell,
// so that cmd's `set /p` reads it) are written to the command's stdin. A
// request that ends without an answer closes stdin for an ask and answers
// "no" for a confirm.
//
// The command and everything it starts are one proctree.Group: a process
// group on Unix, a job object on Windows. Cancelling a task ends the group,
// and so does the command's end: a finished task leaves nothing running.
package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
)

const (
	// MaxLine is the longest output line passed on whole. Longer lines are
	// cut there and marked, so no transcript frame can approach the 1 MiB
	// frame cap however a task prints.
	MaxLine = 16 << 10
	// ResultChars is the size of the output tail reported as the tool
	// call's result (the protocol truncates results to 2000 characters).
	ResultChars = 2000
)

// After the command and its group are gone, its pipes still hold
// what it wrote last, and a child that escaped the group may keep them
// open. The readers go on while output keeps coming: each read waits at
// most drainGrace for data, and at most drainCap more bytes are read (a
// pipe holds 1 MiB at the most, so more can only come from an escaped
// child). Time the readers spend handing lines on does not count: the
// engine holds them back while a console catches up, and the command's
// last lines must survive that.
var (
	drainGrace       = 2 * time.Second
	drainCap   int64 = 1 << 20
)

// Provider is the local shell provider.
type Provider struct {
	// Shell is the shell that runs the commands: "sh", "cmd" or
	// "powershell" (config.json's providers.local.shell); "" is the
	// system's, sh (cmd on Windows). Start refuses a shell the system
	// lacks (CheckShell).
	Shell string
	// Policy, when set, makes a command that matches it wait for the
	// operator's confirm before it starts. Native sessions leave it nil:
	// their root approves such tasks before they are admitted.
	Policy *provider.Policy
}

func (p *Provider) Name() string { return "local" }

// Quiet: a command may print nothing for as long as it needs.
func (p *Provider) Quiet() bool { return true }

// Start returns a session whose turns are shell commands run in spec.Dir.
// Nothing runs between turns, so there is no process to start.
func (p *Provider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	if err := CheckShell(p.Shell); err != nil {
		return nil, err
	}
	return &session{p: p, shell: p.Shell, spec: spec, h: h, done: make(chan struct{})}, nil
}

// session runs one command per turn; see the package comment.
type session struct {
	p     *Provider
	shell string // Provider.Shell
	spec  provider.Spec
	h     provider.Host

	mu     sync.Mutex
	turn   context.CancelCauseFunc // the running turn's; nil between turns
	turnWG sync.WaitGroup
	closed bool
	done   chan struct{}
}

var errInterrupted = errors.New("interrupted")

// Send runs t.Text with the shell on a goroutine of its own; the turn ends
// with TurnEnded once the command and its group are gone.
func (s *session) Send(_ context.Context, t provider.Turn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return provider.ErrClosed
	case s.turn != nil:
		return provider.ErrBusy
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.turn = cancel
	s.turnWG.Add(1)
	go func() {
		defer s.turnWG.Done()
		res := s.runTurn(ctx, t.Text)
		s.mu.Lock()
		s.turn = nil
		s.mu.Unlock()
		cancel(nil)
		s.h.Event(res)
	}()
	return nil
}

// Interrupt kills the running command's group.
func (s *session) Interrupt(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil {
		s.turn(errInterrupted)
	}
	return nil
}

func (s *session) ResumeID() string { return "" }

// Close interrupts a running command and waits for its turn to end.
func (s *session) Close() error {
	s.mu.Lock()
	if s.turn != nil {
		s.turn(errInterrupted)
	}
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	s.turnWG.Wait()
	if first {
		close(s.done)
	}
	return nil
}

func (s *session) Done() <-chan struct{} { return s.done }
func (s *session) Err() error            { return nil }

// runTurn asks for a confirm when the policy wants one, runs the command as
// one "shell" tool call, and says how it ended.
func (s *session) runTurn(ctx context.Context, command string) provider.TurnEnded {
	h := s.h
	if pattern := s.p.Policy.Match(command); pattern != "" {
		approved, err := h.Confirm(ctx, fmt.Sprintf("Run `%s`? It matches the confirm policy (%s).", command, pattern))
		switch {
		case ctx.Err() != nil:
			return provider.TurnEnded{ExitCode: -1, Interrupted: true, Err: fmt.Errorf("cancelled: %w", context.Cause(ctx))}
		case err != nil:
			return provider.TurnEnded{ExitCode: -1, Err: errors.New("not started: the confirm ended without an answer")}
		case !approved:
			return provider.TurnEnded{ExitCode: -1, Err: errors.New("not started: denied by the operator")}
		}
	}
	start := time.Now()
	id := s.spec.Agent
	h.Event(provider.ToolStarted{
		ID:     id,
		Name:   "shell",
		Detail: command,
		Input:  map[string]any{"command": command, "cwd": s.spec.Dir},
	})
	tail := &tailBuffer{}
	res := run(ctx, s.shell, command, s.spec, h, tail)
	result := tail.String()
	if res.Err != nil && result == "" {
		result = res.Err.Error()
	}
	h.Event(provider.ToolCompleted{
		ID:       id,
		Name:     "shell",
		Result:   result,
		IsError:  res.Err != nil,
		Duration: time.Since(start),
	})
	return res
}

func run(ctx context.Context, shell, command string, spec provider.Spec, h provider.Host, tail *tailBuffer) provider.TurnEnded {
	sc, err := shellCommand(shell, command)
	if err != nil {
		return provider.TurnEnded{ExitCode: -1, Err: err}
	}
	defer sc.cleanup() // after the command and its group are gone
	cmd := sc.cmd
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("create stdin pipe: %w", err)}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("create stdout pipe: %w", err)}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("create stderr pipe: %w", err)}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	group, startErr := proctree.StartGroup(cmd)
	// The child has its own copies; ours must close so EOF can arrive.
	stdinR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("start %s: %w", sc.name, startErr)}
	}

	in := &stdin{w: stdinW, eol: sc.eol}
	runCtx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	out, errOut := &pipeReader{f: outR}, &pipeReader{f: errR}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		readLines(out, func(lines []string) {
			tail.add(lines)
			// Workflow lines are answered in order: the lines before one
			// go out first, as the operator would see them.
			from := 0
			for i, line := range lines {
				if isWorkflow(line) {
					if from < i {
						h.Event(provider.Output{Stream: provider.Stdout, Lines: lines[from:i]})
					}
					workflowLine(runCtx, line, h, in)
					from = i + 1
				}
			}
			if from < len(lines) {
				h.Event(provider.Output{Stream: provider.Stdout, Lines: lines[from:]})
			}
		})
	}()
	go func() {
		defer readers.Done()
		readLines(errOut, func(lines []string) {
			tail.add(lines)
			h.Event(provider.Output{Stream: provider.Stderr, Lines: lines})
		})
	}()

	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()
	var waitErr error
	cancelled := false
	select {
	case waitErr = <-waitDone:
	case <-ctx.Done():
		cancelled = true
		group.Kill()
		waitErr = <-waitDone
	}
	// Whatever the command left running in its group goes too: a finished
	// task leaves nothing behind.
	group.Kill()
	stopReaders() // unblock a reader waiting on an answer
	in.close()

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	if out.end() == nil && errOut.end() == nil {
		<-drained
	} else {
		// No read deadlines on these pipes (Windows): the readers get
		// drainGrace in all, then their pipes close under them.
		select {
		case <-drained:
		case <-time.After(drainGrace):
			out.cut.Store(true)
		}
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	if out.cut.Load() || errOut.cut.Load() {
		h.Event(provider.Note{Text: "output still open after the command ended; stopped reading it"})
	}

	code := cmd.ProcessState.ExitCode()
	switch {
	case cancelled:
		return provider.TurnEnded{ExitCode: code, Interrupted: true, Err: fmt.Errorf("cancelled: %w", context.Cause(ctx))}
	case waitErr != nil:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			if code == 127 {
				return provider.TurnEnded{ExitCode: code, Err: fmt.Errorf("exit status 127 (command not found)")}
			}
			return provider.TurnEnded{ExitCode: code, Err: fmt.Errorf("%s", ee.ProcessState.String())}
		}
		return provider.TurnEnded{ExitCode: code, Err: waitErr}
	}
	return provider.TurnEnded{ExitCode: code}
}

// pipeReader reads one of a command's output pipes; see drainGrace for
// what changes once the command has ended (end).
type pipeReader struct {
	f     *os.File
	ended atomic.Bool
	left  int64       // bytes still to read after the end; the reader's own
	cut   atomic.Bool // the reader stopped before the pipe's end
}

func (p *pipeReader) Read(b []byte) (int, error) {
	if p.ended.Load() {
		if p.left == 0 {
			p.cut.Store(true)
			return 0, io.EOF
		}
		if int64(len(b)) > p.left {
			b = b[:p.left]
		}
		p.f.SetReadDeadline(time.Now().Add(drainGrace))
	}
	n, err := p.f.Read(b)
	if p.ended.Load() { // also when it ended during this read
		p.left = max(0, p.left-int64(n))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.cut.Store(true)
		err = io.EOF
	}
	return n, err
}

// end tells the reader the command has ended, and bounds a read already
// waiting; an error means the pipe has no deadlines.
func (p *pipeReader) end() error {
	p.left = drainCap // before ended: the reader reads it only after
	p.ended.Store(true)
	return p.f.SetReadDeadline(time.Now().Add(drainGrace))
}

// readBuf is how much output one read takes in: a pipe's default size.
const readBuf = 64 << 10

// readLines reads r to its end and calls fn with the complete lines each
// read brought, without their newlines (LF; CR LF on Windows), in order.
// The lines of one call share one allocation, and fn must not keep the
// slice. Lines longer than MaxLine are cut and marked; a final line
// without a newline counts.
func readLines(r io.Reader, fn func(lines []string)) {
	buf := make([]byte, readBuf)
	var lines []string
	n := 0          // buf[:n] is the start of a line not yet complete
	var long []byte // the start of a line longer than buf, capped
	dropped := 0    // bytes of that line beyond MaxLine
	for {
		m, err := r.Read(buf[n:])
		if i := bytes.LastIndexByte(buf[n:n+m], '\n'); i >= 0 {
			end := n + i + 1
			chunk := string(buf[:end]) // the one allocation
			lines = lines[:0]
			for len(chunk) > 0 {
				j := strings.IndexByte(chunk, '\n')
				line := chunk[:j]
				chunk = chunk[j+1:]
				if long != nil || len(line) > MaxLine {
					long, dropped = appendCapped(long, []byte(line), dropped)
					line = finishLine(long, dropped)
					long, dropped = nil, 0
				}
				if crlf {
					line = strings.TrimSuffix(line, "\r")
				}
				lines = append(lines, line)
			}
			fn(lines)
			clear(lines)
			n = copy(buf, buf[end:n+m])
		} else {
			n += m
		}
		if n == len(buf) {
			// No newline in a whole buffer: keep the line's start aside.
			long, dropped = appendCapped(long, buf[:n], dropped)
			n = 0
		}
		if err != nil {
			if n > 0 || long != nil {
				long, dropped = appendCapped(long, buf[:n], dropped)
				fn([]string{finishLine(long, dropped)})
			}
			return
		}
	}
}

func appendCapped(dst, src []byte, dropped int) ([]byte, int) {
	room := MaxLine - len(dst)
	if room >= len(src) {
		return append(dst, src...), dropped
	}
	if room > 0 {
		dst = append(dst, src[:room]...)
		src = src[room:]
	}
	return dst, dropped + len(src)
}

func finishLine(line []byte, dropped int) string {
	if dropped == 0 {
		return string(line)
	}
	line = trimPartialRune(line)
	return fmt.Sprintf("%s… [line truncated: %d more bytes]", line, dropped)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, so a
// cut line stays valid text.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// stdin is the command's standard input, shared by workflow answers.
type stdin struct {
	mu     sync.Mutex
	w      *os.File
	eol    string // ends each answer: the shell's newline
	closed bool
}

func (s *stdin) write(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	// A command that closed its stdin gets EPIPE here; that is its choice.
	s.w.WriteString(text + s.eol)
}

func (s *stdin) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.w.Close()
	}
}

const (
	askPrefix     = "::ask::"
	confirmPrefix = "::confirm::"
)

// isWorkflow reports whether line is an ::ask:: or ::confirm:: line.
func isWorkflow(line string) bool {
	return strings.HasPrefix(line, askPrefix) || strings.HasPrefix(line, confirmPrefix)
}

// workflowLine handles an ::ask:: or ::confirm:: line. It blocks until the
// operator answers.
func workflowLine(ctx context.Context, line string, h provider.Host, in *stdin) {
	switch {
	case strings.HasPrefix(line, askPrefix):
		q, err := parseAsk(line[len(askPrefix):])
		if err != nil {
			h.Event(provider.Note{Text: fmt.Sprintf("malformed %s line (%v); closing the command's stdin", askPrefix, err)})
			in.close()
			return
		}
		answer, err := h.Ask(ctx, q)
		if err != nil {
			in.close()
			return
		}
		in.write(answer)
	case strings.HasPrefix(line, confirmPrefix):
		summary := strings.TrimSpace(line[len(confirmPrefix):])
		if summary == "" {
			summary = "Continue?"
		}
		ok, err := h.Confirm(ctx, summary)
		if err == nil && ok {
			in.write("yes")
		} else {
			in.write("no")
		}
	}
}

// askLine is the JSON a script writes after ::ask::. choices may be plain
// strings (label = value) or {label, value, description} objects.
type askLine struct {
	Question      string            `json:"question"`
	Kind          string            `json:"kind"`
	Choices       []json.RawMessage `json:"choices"`
	AllowFreeform bool              `json:"allowFreeform"`
}

func parseAsk(s string) (provider.Question, error) {
	var a askLine
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&a); err != nil {
		return provider.Question{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if strings.TrimSpace(a.Question) == "" {
		return provider.Question{}, errors.New(`"question" is required`)
	}
	q := provider.Question{Text: a.Question, Kind: a.Kind, AllowFreeform: a.AllowFreeform}
	for i, raw := range a.Choices {
		var c provider.Choice
		var s string
		if json.Unmarshal(raw, &s) == nil {
			c = provider.Choice{Label: s, Value: s}
		} else if err := json.Unmarshal(raw, &c); err != nil || c.Value == "" {
			return provider.Question{}, fmt.Errorf("choice %d must be a string or an object with a value", i+1)
		}
		if c.Label == "" {
			c.Label = c.Value
		}
		q.Choices = append(q.Choices, c)
	}
	if q.Kind == "" {
		q.Kind = "freeform"
		if len(q.Choices) > 0 {
			q.Kind = "choice"
		}
	}
	return q, nil
}

// tailBuffer keeps the end of the output, enough for ResultChars runes:
// a byte window of at most tailBytes, trimmed from the front. It runs on
// the hot path (every line), so it only copies bytes; counting runes
// happens once, in String.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte // lines joined by '\n', newest last
}

// tailBytes bounds the window: ResultChars runes are at most 4 bytes each.
const tailBytes = ResultChars * utf8.UTFMax

func (t *tailBuffer) add(lines []string) {
	// Only the newest tailBytes can matter: skip the lines before them.
	first, size := len(lines), 0
	for first > 0 && size < tailBytes {
		first--
		size += len(lines[first]) + 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, line := range lines[first:] {
		if len(t.buf) > 0 {
			t.buf = append(t.buf, '\n')
		}
		if len(line) > tailBytes {
			line = line[len(line)-tailBytes:]
		}
		t.buf = append(t.buf, line...)
		if len(t.buf) > 2*tailBytes {
			// Drop the front, keeping the newest tailBytes.
			t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
		}
	}
}

// String returns the tail, at most ResultChars runes, cut at the front (on
// a rune boundary).
func (t *tailBuffer) String() string {
	t.mu.Lock()
	b := t.buf
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	s := string(b)
	t.mu.Unlock()
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	if n := utf8.RuneCountInString(s); n > ResultChars {
		r := []rune(s)
		return string(r[len(r)-ResultChars:])
	}
	return s
}
