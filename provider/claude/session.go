package claude

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
)

// Bounds of the session's life cycle. Each wait that depends on the CLI
// has one, so that no Session method waits on a CLI that stopped talking.
const (
	// startBound caps Start when its ctx has no earlier deadline: the CLI
	// answers initialize in about a second on an idle machine.
	startBound = 60 * time.Second
	// interruptBound is how long a turn may go on after the interrupt
	// control request before the CLI and its tree are killed.
	interruptBound = 10 * time.Second
	// closeInterruptGrace is how long Close waits for an interrupted turn's
	// result line.
	closeInterruptGrace = 5 * time.Second
)

// initID is the id of the initialize control request Start sends.
const initID = "init-1"

// MaxLine is the longest stdout line the adapter accepts. Claude prints a
// whole content block or tool result per line, so a large file read makes
// a line of megabytes; a line past the cap fails the session.
const MaxLine = 8 << 20

// session is one running CLI. The stdout goroutine (the one running
// cli.Read) owns the stream state and is the only caller of Host.Event.
type session struct {
	h    provider.Host
	spec provider.Spec
	cli  *agentcli.Conn   // the CLI's process; nil in the offline tests
	in   *agentcli.Writer // its stdin

	// ctx ends when the session ends: pending permission prompts give up.
	ctx    context.Context
	cancel context.CancelFunc

	done chan struct{}

	reqSeq    atomic.Int64 // control request ids we send
	prompts   agentcli.Prompts[[]byte]
	closeOnce sync.Once

	mu        sync.Mutex
	turn      *turn // the running turn; nil between turns
	resumeID  string
	closing   bool // Close has begun
	ended     bool // the CLI is gone
	err       error
	pending   map[string]chan controlReply // our control requests awaiting an answer
	watchdog  *time.Timer                  // armed by an interrupt
	watchFire chan struct{}                // closed when the watchdog's kill returned

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
		h:        h,
		spec:     spec,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		resumeID: spec.ResumeID,
		pending:  map[string]chan controlReply{},
		st:       newStream(),
	}
}

// start runs the session on the CLI's process and waits for its answer to
// initialize.
func (s *session) start(ctx context.Context, proc agentcli.Process) error {
	s.cli = agentcli.NewConn(proc)
	s.in = s.cli.Stdin()
	go func() {
		_ = s.cli.Read(MaxLine, s.handleLine) // a read error is the kill's reason
		s.finish()
	}()

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
	if t := s.cli.Stderr(); t != "" {
		msg += "; stderr: " + t
	} else {
		msg += "; nothing on stderr"
	}
	if s.st.garbage > 0 {
		msg += fmt.Sprintf("; it printed %d line(s) that are not JSON, the first: %q", s.st.garbage, s.st.firstGarbage)
	}
	return msg
}

// finish ends the session once the CLI's side ended (cli.Read
// returned: the tree is gone, the pipes closed): it ends a running turn
// with the reason, and closes done.
func (s *session) finish() {
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
	s.prompts.Wait()
	close(s.done)
}

// endCauseLocked says why the CLI ended. s.mu must be held, and the
// stdout goroutine done with the stream.
func (s *session) endCauseLocked() error {
	how := s.cli.ExitText()
	var msg string
	if stopped := s.cli.Stopped(); stopped != "" {
		msg = "claude was stopped (" + how + "): " + stopped
	} else {
		msg = "claude exited unexpectedly (" + how + ")"
	}
	return errors.New(msg + s.diagnostics())
}

// kill ends the CLI's whole tree; why, when set, is the end cause.
func (s *session) kill(why string) { s.cli.Kill(why) }

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
func (s *session) write(ctx context.Context, v any) error { return s.in.WriteJSON(ctx, v) }

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
		s.cli.Stop()
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
