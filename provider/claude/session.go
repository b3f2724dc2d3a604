package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
)

// Bounds of the session's life cycle. Each wait that depends on the CLI
// has one, so that no Session method waits on a CLI that stopped talking.
const (
	// startBound caps Start when its ctx has no earlier deadline: the CLI
	// answers initialize in about a second on an idle machine.
	startBound = 60 * time.Second
	// writeTimeout caps one write to the CLI's stdin (a CLI that stopped
	// reading). A Send's ctx deadline shortens it.
	writeTimeout = 10 * time.Second
	// interruptBound is how long a turn may go on after the interrupt
	// control request before the CLI and its tree are killed.
	interruptBound = 10 * time.Second
	// closeInterruptGrace is how long Close waits for an interrupted turn's
	// result line.
	closeInterruptGrace = 5 * time.Second
	// closeGrace is how long Close waits for the CLI to exit after its
	// stdin was closed (it exits at once when idle).
	closeGrace = 3 * time.Second
	// exitGrace is how long the CLI may live on after closing its stdout.
	exitGrace = 3 * time.Second
	// drainGrace is how long stderr may stay open after the process tree
	// is gone (something outside the tree may hold it).
	drainGrace = time.Second
)

// initID is the id of the initialize control request Start sends.
const initID = "init-1"

// session is one running CLI. The stdout goroutine (readLoop) owns the
// stream state and is the only caller of Host.Event.
type session struct {
	h    provider.Host
	spec provider.Spec
	tree *proctree.Tree
	cmd  *exec.Cmd

	stdin          *os.File // our end of the CLI's stdin
	stdout, stderr *os.File // our ends of its stdout and stderr
	errTail        tail

	// ctx ends when the session ends: pending permission prompts give up.
	ctx    context.Context
	cancel context.CancelFunc

	wmu         sync.Mutex // serialises stdin writes; guards stdinClosed
	stdinClosed bool

	exited     chan struct{} // closed once the CLI was reaped and its tree killed
	waitErr    error         // set before exited is closed
	stderrDone chan struct{}
	done       chan struct{}

	reqSeq    atomic.Int64 // control request ids we send
	perms     sync.WaitGroup
	closeOnce sync.Once

	mu        sync.Mutex
	turn      *turn // the running turn; nil between turns
	resumeID  string
	closing   bool // Close has begun
	ended     bool // the CLI is gone
	err       error
	pending   map[string]chan controlReply // our control requests awaiting an answer
	permAbort map[string]context.CancelFunc
	watchdog  *time.Timer   // armed by an interrupt
	watchFire chan struct{} // closed when the watchdog's kill returned
	stopped   string        // why the adapter killed the CLI, for the end cause

	st stream // stdout goroutine only
}

// turn is one Send's turn.
type turn struct {
	ctx         context.Context // ends when the turn ends or is interrupted
	cancel      context.CancelFunc
	interrupted bool          // we asked the CLI to interrupt it; mu
	ended       chan struct{} // closed after its TurnEnded
}

type controlReply struct {
	raw []byte // the response member of a success
	err error
}

func newSession(h provider.Host, spec provider.Spec) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{
		h:          h,
		spec:       spec,
		tree:       proctree.New(),
		ctx:        ctx,
		cancel:     cancel,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		done:       make(chan struct{}),
		resumeID:   spec.ResumeID,
		pending:    map[string]chan controlReply{},
		permAbort:  map[string]context.CancelFunc{},
		st:         newStream(),
	}
}

// start runs the CLI and waits for its answer to initialize.
func (s *session) start(ctx context.Context, path string, args []string, dir string, env []string) error {
	s.cmd = newCmd(path, args, dir, env, s.tree)
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return fmt.Errorf("claude: stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("claude: stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return fmt.Errorf("claude: stderr pipe: %w", err)
	}
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = inR, outW, errW
	if err := s.cmd.Start(); err != nil {
		closeAll()
		s.cancel()
		return fmt.Errorf("claude: start %s: %w", path, err)
	}
	// The child has its copies; ours must go so that EOF can arrive.
	inR.Close()
	outW.Close()
	errW.Close()
	s.stdin, s.stdout, s.stderr = inW, outR, errR

	go s.waitLoop()
	go s.stderrLoop()
	go s.readLoop()

	reply := s.expect(initID)
	bound := time.NewTimer(startBound)
	defer bound.Stop()
	if err := s.write(ctx, controlRequest{Type: "control_request", RequestID: initID, Request: map[string]any{"subtype": "initialize", "hooks": nil}}); err != nil {
		// The CLI is gone (or not reading): its end cause says why.
		s.kill("")
		<-s.done
		return s.startErr(err)
	}
	select {
	case r := <-reply:
		if r.err != nil {
			s.kill("")
			<-s.done
			return s.startErr(r.err)
		}
		return nil
	case <-s.done:
		return s.startErr(nil)
	case <-ctx.Done():
		s.kill("")
		<-s.done
		return fmt.Errorf("claude did not start: %w%s", ctx.Err(), s.diagnostics())
	case <-bound.C:
		s.kill("")
		<-s.done
		return fmt.Errorf("claude did not answer its initialize request within %v%s", startBound, s.diagnostics())
	}
}

// startErr is Start's error once the session ended during start-up.
func (s *session) startErr(cause error) error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err == nil {
		err = cause
	}
	if err == nil {
		err = errors.New("claude ended during start-up")
	}
	return fmt.Errorf("claude failed to start: %w", err)
}

// diagnostics is what the CLI said so far, for an error: the stderr tail
// and the first garbage line. Only call it once the stdout goroutine has
// finished (after done).
func (s *session) diagnostics() string {
	msg := ""
	if s.st.startErr != "" {
		msg += ": " + s.st.startErr
	}
	if t := s.errTail.String(); t != "" {
		msg += "; stderr: " + t
	} else {
		msg += "; nothing on stderr"
	}
	if s.st.garbage > 0 {
		msg += fmt.Sprintf("; it printed %d line(s) that are not JSON, the first: %q", s.st.garbage, s.st.firstGarbage)
	}
	return msg
}

func (s *session) waitLoop() {
	err := s.cmd.Wait()
	// Whatever the CLI started goes with it, however it detached.
	s.tree.Kill(s.cmd)
	s.waitErr = err
	close(s.exited)
}

func (s *session) stderrLoop() {
	defer close(s.stderrDone)
	buf := make([]byte, 4<<10)
	_, _ = io.CopyBuffer(&s.errTail, s.stderr, buf)
}

func (s *session) readLoop() {
	lr := newLineReader(s.stdout, MaxLine)
	var readErr error
	for {
		line, err := lr.next()
		if len(line) > 0 {
			s.handleLine(line)
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	s.finish(readErr)
}

// finish ends the session once stdout is done: it makes sure the tree is
// gone, ends a running turn with the reason, and closes done.
func (s *session) finish(readErr error) {
	if readErr != nil {
		why := "reading its output failed: " + readErr.Error()
		if errors.Is(readErr, errLineTooLong) {
			why = readErr.Error() + " (a protocol error); the adapter stopped it"
		}
		s.kill(why)
	}
	select {
	case <-s.exited:
	case <-time.After(exitGrace):
		s.kill("it closed its output but did not exit")
		<-s.exited
	}
	select {
	case <-s.stderrDone:
	case <-time.After(drainGrace):
		_ = s.stderr.SetReadDeadline(time.Now())
		<-s.stderrDone
	}
	s.stdout.Close()
	s.stderr.Close()
	s.closeStdin()

	s.mu.Lock()
	if s.watchdog != nil && !s.watchdog.Stop() {
		fired := s.watchFire
		s.mu.Unlock()
		<-fired // its kill has returned
		s.mu.Lock()
	}
	cause := s.endCauseLocked()
	t := s.turn
	s.turn = nil
	closing := s.closing
	interrupted := t != nil && t.interrupted
	s.ended = true
	if !closing {
		s.err = cause
	}
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()

	for _, ch := range pending {
		ch <- controlReply{err: cause}
	}
	if t != nil {
		t.cancel()
		s.st.closeOpenTools(s.h, "the session ended before the tool finished")
		ev := provider.TurnEnded{Err: cause, Interrupted: interrupted || closing}
		s.h.Event(ev)
		close(t.ended)
	}
	s.cancel()
	s.perms.Wait()
	close(s.done)
}

// endCauseLocked says why the CLI ended. s.mu must be held, exited closed
// and the stdout goroutine done with the stream.
func (s *session) endCauseLocked() error {
	how := exitText(s.cmd.ProcessState, s.waitErr)
	var msg string
	if s.stopped != "" {
		msg = "claude was stopped (" + how + "): " + s.stopped
	} else {
		msg = "claude exited unexpectedly (" + how + ")"
	}
	return errors.New(msg + s.diagnostics())
}

// kill ends the CLI's whole tree; why, when set, is the end cause.
func (s *session) kill(why string) {
	if why != "" {
		s.mu.Lock()
		if s.stopped == "" {
			s.stopped = why
		}
		s.mu.Unlock()
	}
	s.tree.Kill(s.cmd)
}

// expect registers a pending control request of ours.
func (s *session) expect(id string) <-chan controlReply {
	ch := make(chan controlReply, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		ch <- controlReply{err: provider.ErrClosed}
		return ch
	}
	s.pending[id] = ch
	return ch
}

// write sends v as one JSON line to the CLI's stdin.
func (s *session) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.writeLine(ctx, append(b, '\n'))
}

// writeLine sends b, one JSON line with its newline, to the CLI's stdin.
func (s *session) writeLine(ctx context.Context, b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.stdinClosed {
		return provider.ErrClosed
	}
	dl := time.Now().Add(writeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = s.stdin.SetWriteDeadline(dl)
	_, err := s.stdin.Write(b)
	return err
}

// closeStdin closes the CLI's stdin, which asks an idle CLI to exit. A
// write blocked on a CLI that stopped reading is cut short.
func (s *session) closeStdin() {
	_ = s.stdin.SetWriteDeadline(time.Now())
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.stdinClosed {
		s.stdinClosed = true
		s.stdin.Close()
	}
}

type controlRequest struct {
	Type      string         `json:"type"`
	RequestID string         `json:"request_id"`
	Request   map[string]any `json:"request"`
}

type userMessage struct {
	Type    string      `json:"type"`
	Message userContent `json:"message"`
}

type userContent struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Send hands the turn to the CLI as one stream-json user message.
func (s *session) Send(ctx context.Context, t provider.Turn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tr, err := s.beginTurn()
	if err != nil {
		return err
	}
	msg := userMessage{Type: "user", Message: userContent{Role: "user", Content: []textBlock{{Type: "text", Text: t.Text}}}}
	if err := s.write(ctx, msg); err != nil {
		s.mu.Lock()
		mine := s.turn == tr
		if mine {
			s.turn = nil
		}
		s.mu.Unlock()
		if !mine {
			return nil // the session ended meanwhile and ended the turn with its reason
		}
		tr.cancel()
		close(tr.ended)
		return fmt.Errorf("send the turn to claude: %w", err)
	}
	return nil
}

// beginTurn makes a new turn the running one.
func (s *session) beginTurn() (*turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.closing {
		return nil, provider.ErrClosed
	}
	if s.turn != nil {
		return nil, provider.ErrBusy
	}
	tctx, cancel := context.WithCancel(s.ctx)
	s.turn = &turn{ctx: tctx, cancel: cancel, ended: make(chan struct{})}
	return s.turn, nil
}

// Interrupt sends the interrupt control request; the CLI kills the running
// tool and ends the turn with an error_during_execution result. A turn
// that is still going interruptBound later is ended by killing the tree.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	t, ended := s.turn, s.ended
	s.mu.Unlock()
	if ended {
		return provider.ErrClosed
	}
	if t == nil {
		return nil
	}
	return s.interrupt(ctx, t)
}

func (s *session) interrupt(ctx context.Context, t *turn) error {
	s.mu.Lock()
	if s.turn != t || t.interrupted {
		s.mu.Unlock()
		return nil
	}
	t.interrupted = true
	s.mu.Unlock()
	id := "int-" + strconv.FormatInt(s.reqSeq.Add(1), 10)
	err := s.write(ctx, controlRequest{Type: "control_request", RequestID: id, Request: map[string]any{"subtype": "interrupt"}})
	// Prompts still waiting for the operator are denied now: the CLI has
	// dropped them (control_cancel_request) or will.
	t.cancel()
	s.armWatchdog(t)
	if err != nil {
		return fmt.Errorf("interrupt claude: %w", err)
	}
	return nil
}

// armWatchdog kills the tree if t is still running interruptBound from now.
func (s *session) armWatchdog(t *turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchdog != nil || s.ended {
		return
	}
	fired := make(chan struct{})
	s.watchFire = fired
	s.watchdog = time.AfterFunc(interruptBound, func() {
		defer close(fired)
		s.mu.Lock()
		still := s.turn == t
		s.mu.Unlock()
		if still {
			s.kill(fmt.Sprintf("the turn was still running %v after the interrupt", interruptBound))
		}
	})
}

// disarmWatchdogLocked stops the watchdog at the end of a turn, waiting for
// a kill in progress. s.mu must be held; it is released while waiting.
func (s *session) disarmWatchdogLocked() {
	if s.watchdog == nil {
		return
	}
	if !s.watchdog.Stop() {
		fired := s.watchFire
		s.mu.Unlock()
		<-fired
		s.mu.Lock()
	}
	s.watchdog, s.watchFire = nil, nil
}

// ResumeID is the CLI's session id: the one resumed, then each
// system/init's.
func (s *session) ResumeID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumeID
}

// Close interrupts a running turn, closes stdin, and kills the tree when
// the CLI has not exited after a short grace. It returns once everything
// of the session is gone.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		t := s.turn
		s.mu.Unlock()
		if t != nil {
			ctx, cancel := context.WithTimeout(context.Background(), closeInterruptGrace)
			_ = s.interrupt(ctx, t)
			select {
			case <-t.ended:
			case <-s.done:
			case <-ctx.Done():
			}
			cancel()
		}
		s.closeStdin()
		select {
		case <-s.done:
		case <-time.After(closeGrace):
			s.kill("it did not exit when its input was closed")
		}
	})
	<-s.done
	return nil
}

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
