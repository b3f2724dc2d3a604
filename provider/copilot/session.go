package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

const (
	// protocolVersion is the ACP version the adapter speaks.
	protocolVersion = 1
	// maxLine is the longest line the adapter reads from the CLI. A longer
	// one is a protocol error that ends the session; reading it never
	// allocates more than this.
	maxLine = 8 << 20

	// cancelWait bounds how long Close waits for an interrupted turn's
	// end before it stops the CLI.
	cancelWait = 5 * time.Second
	// killWait bounds the wait for the reader after the tree was killed.
	killWait = 10 * time.Second
	// pipeGrace is how long a failed start-up waits for the CLI's exit
	// and its stderr, to say why it failed.
	pipeGrace = 2 * time.Second
)

// sessionConfig is what Start hands a session.
type sessionConfig struct {
	spec    provider.Spec
	host    provider.Host
	scratch string // removed when the session ends
	model   string
}

// session is one `copilot --acp` process and its ACP session.
type session struct {
	cfg sessionConfig
	h   provider.Host
	cli *agentcli.Conn  // the CLI's process; nil in the parse tests
	rpc *jsonrpc.Client // requests, responses and prompts over its pipes

	// ctx ends (cancel) when the session ends; permission prompts use it.
	ctx    context.Context
	cancel context.CancelFunc

	loading atomic.Bool // session/load is replaying history

	done chan struct{} // closed when the reader finished: the session ended

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards the fields below; never held across Host calls or writes
	id      string     // the ACP session id
	turn    *turn      // the running turn, nil between turns
	closing bool       // Close started
	err     error      // why the session ended, when not by Close

	// rs is the reader goroutine's own state.
	rs readState
}

// readState is what the reader goroutine keeps between lines. Only the
// reader touches it.
type readState struct {
	text     strings.Builder
	kind     textKind
	lastText string // the turn's last assistant message: TurnEnded.Result
	errText  string // the CLI's "Error: …" notice, the turn's failure unless the model went on
	tools    map[string]*toolCall

	total   promptUsage // the session's usage so far, as the CLI last said
	ctxUsed int64
	ctxSize int64

	garbageLines int // lines that were not JSON-RPC
	unknown      int // updates and messages of kinds the adapter does not map
	ignored      int // updates that came between turns
}

func (r *readState) resetTurn() {
	r.text.Reset()
	r.kind = noText
	r.lastText = ""
	r.errText = ""
	clear(r.tools)
}

// turn is one Send's turn.
type turn struct {
	ctx         context.Context // ends with the turn; permission prompts of the turn use it
	cancel      context.CancelFunc
	ended       chan struct{} // closed after TurnEnded was sent
	interrupted atomic.Bool
	before      map[int]bool // processes outside the CLI's group when the turn began
}

// newSession is a session writing to w, without a process yet.
func newSession(cfg sessionConfig, w jsonrpc.LineWriter) *session {
	s := &session{cfg: cfg, h: cfg.host, done: make(chan struct{})}
	s.rs.tools = map[string]*toolCall{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rpc = jsonrpc.NewClient(w, s, jsonrpc.Options{Version: true})
	return s
}

// startSession runs a session on the CLI's process: it initialises ACP
// and opens (or loads) the session. On any error nothing of it is left.
func startSession(ctx context.Context, proc agentcli.Process, cfg sessionConfig) (*session, error) {
	cli := agentcli.NewConn(proc)
	s := newSession(cfg, cli.Stdin())
	s.cli = cli
	go func() { s.end(cli.Read(maxLine, s.handleLine)) }()
	if err := s.handshake(ctx); err != nil {
		err = s.startError(err) // before abort: whether the CLI died on its own
		s.abort()
		return nil, err
	}
	return s, nil
}

// handshake sends initialize, then session/new or session/load.
func (s *session) handshake(ctx context.Context) error {
	res, err := s.rpc.Await(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		// No fs or terminal capability: the CLI uses its own tools.
		"clientCapabilities": map[string]any{},
		"clientInfo":         map[string]any{"name": "agents-fleet", "version": "1"},
	}, nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("initialize: bad result: %w", err)
	}
	if init.ProtocolVersion != protocolVersion {
		return fmt.Errorf("initialize: the CLI speaks ACP version %d, the adapter %d", init.ProtocolVersion, protocolVersion)
	}
	spec := s.cfg.spec
	if spec.ResumeID != "" {
		if !init.AgentCapabilities.LoadSession {
			return fmt.Errorf("cannot resume session %s: this CLI does not offer session/load", spec.ResumeID)
		}
		s.loading.Store(true)
		_, err := s.rpc.Await(ctx, "session/load", map[string]any{
			"sessionId": spec.ResumeID, "cwd": s.cwd(), "mcpServers": []any{},
		}, func(_ json.RawMessage, err error) {
			s.loading.Store(false)
			if err == nil {
				s.started(spec.ResumeID)
			}
		})
		if err != nil {
			return fmt.Errorf("cannot resume session %s: %w", spec.ResumeID, err)
		}
		return nil
	}
	_, err = s.rpc.Await(ctx, "session/new", map[string]any{"cwd": s.cwd(), "mcpServers": []any{}},
		func(res json.RawMessage, err error) {
			if err != nil {
				return
			}
			var r struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(res, &r) == nil && r.SessionID != "" {
				s.started(r.SessionID)
			}
		})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	if s.ResumeID() == "" {
		return errors.New("session/new: the CLI gave no session id")
	}
	return nil
}

// started records the session id and reports it (on the reader).
func (s *session) started(id string) {
	s.mu.Lock()
	s.id = id
	s.mu.Unlock()
	s.h.Event(provider.SessionStarted{ID: id, Model: s.cfg.model})
}

// cwd is the session's working directory: Spec.Dir, absolute (ACP
// requires an absolute path), or the process's own.
func (s *session) cwd() string {
	if d := s.cfg.spec.Dir; d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	d, _ := os.Getwd()
	return d
}

func (s *session) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// startError is a start-up failure, in the CLI's own words when it died:
// a CLI that exits at once fails the first write or read, and what it
// said on stderr is the reason, not the broken pipe.
func (s *session) startError(err error) error {
	var answered *jsonrpc.Error // the CLI answered: it is alive
	if !errors.As(err, &answered) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		select {
		case <-s.cli.Exited():
		case <-time.After(pipeGrace):
		}
	}
	if isClosed(s.cli.Exited()) {
		desc := s.exitDescription()
		if strings.Contains(err.Error(), desc) { // a call the end of the stream failed
			return fmt.Errorf("copilot: start-up failed: %s", desc)
		}
		return fmt.Errorf("copilot: start-up failed: %s (%v)", desc, err)
	}
	msg := "copilot: " + err.Error()
	if t := s.stderr(); t != "" {
		msg += "; stderr: " + t
	}
	return errors.New(msg)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// exitDescription says how the CLI ended, with its stderr's tail. The
// CLI must have exited.
func (s *session) exitDescription() string {
	<-s.stderrDone()
	var b strings.Builder
	b.WriteString("the CLI ")
	if s.cli.ExitErr() == nil {
		b.WriteString("exited with status 0")
	} else {
		b.WriteString("ended: ")
		b.WriteString(s.cli.ExitText())
	}
	if t := s.stderr(); t != "" {
		b.WriteString("; stderr: ")
		b.WriteString(t)
	} else {
		b.WriteString("; no stderr")
	}
	return b.String()
}

// stderrDone is closed once stderr ended, or after a short grace: a
// descendant may hold stderr open after the CLI exited.
func (s *session) stderrDone() <-chan struct{} {
	select {
	case <-s.cli.StderrDone():
		return s.cli.StderrDone()
	case <-time.After(pipeGrace):
		c := make(chan struct{})
		close(c)
		return c
	}
}

func (s *session) stderr() string { return s.cli.Stderr() }

// abort ends a session that failed to start: kill, wait, clean up.
func (s *session) abort() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cli.Stdin().Close()
	s.cli.Kill("")
	select {
	case <-s.done:
	case <-time.After(killWait):
	}
	s.finish()
}

// finish releases what a session holds once it ended.
func (s *session) finish() {
	s.cancel()
	s.rpc.WaitPrompts()
	s.cli.Kill("")
	_ = os.RemoveAll(s.cfg.scratch)
}

// end runs on the reader once the CLI's side ended (cli.Read returned:
// the tree is gone, the pipes are closed): it ends a running turn and any
// pending call with the reason, and marks the session done.
func (s *session) end(readErr error) {
	s.mu.Lock()
	closing := s.closing
	t := s.turn
	s.mu.Unlock()

	var why error
	switch {
	case errors.Is(readErr, agentcli.ErrLineTooLong):
		why = fmt.Errorf("copilot: %w; the session was stopped (%s)", readErr, s.exitDescription())
	case readErr != nil:
		why = fmt.Errorf("copilot: reading the CLI's output: %v (%s)", readErr, s.exitDescription())
	case closing:
		why = provider.ErrClosed
	default:
		why = fmt.Errorf("copilot: %s", s.exitDescription())
	}
	// The turn first, so it ends with why rather than as a failed prompt.
	if t != nil {
		s.flushText()
		if closing && readErr == nil {
			s.endOpenTools("the session was closed")
			s.endTurn(t, provider.TurnEnded{Result: s.rs.lastText, Interrupted: true, ExitCode: -1})
		} else {
			s.endOpenTools("the CLI ended")
			s.endTurn(t, provider.TurnEnded{Result: s.rs.lastText, Err: midTurn(why), ExitCode: -1})
		}
	}
	s.rpc.Close(why)
	s.mu.Lock()
	if !closing || readErr != nil {
		s.err = why
	}
	s.mu.Unlock()
	s.cancel()
	close(s.done)
}

func midTurn(err error) error {
	return fmt.Errorf("the turn did not finish: %w", err)
}

// handleLine hands one line to its handler. session/update notifications,
// nine lines in ten, take a faster path (updateLine).
func (s *session) handleLine(line []byte) {
	if s.updateLine(line) {
		return
	}
	s.rpc.Dispatch(line)
}

// Request answers an agent→client request (jsonrpc.Handler): a permission
// prompt goes to the host, anything else gets method-not-found at once.
func (s *session) Request(id json.RawMessage, method string, p jsonrpc.Params) {
	if method == "session/request_permission" {
		s.permission(id, p.Raw())
		return
	}
	s.rs.unknown++
	_ = s.rpc.RespondError(id, jsonrpc.CodeMethodNotFound, "the fleet's client does not offer "+method)
}

// Notification maps session/update (jsonrpc.Handler); other
// notifications are counted.
func (s *session) Notification(method string, p jsonrpc.Params) {
	switch {
	case method == "session/update":
		s.handleUpdateParams(p)
	case !p.Valid():
		s.garbage("line", p.Line())
	default:
		s.rs.unknown++
	}
}

// Invalid counts a line that is not JSON-RPC (jsonrpc.Handler).
func (s *session) Invalid(line []byte) { s.garbage("line", line) }

// garbage counts a line that is not what it should be; the first one is
// reported as a Note.
func (s *session) garbage(what string, b []byte) {
	s.rs.garbageLines++
	if s.rs.garbageLines == 1 {
		s.h.Event(provider.Note{Text: fmt.Sprintf("copilot printed a %s that is not valid ACP, ignored (further ones are counted, not shown): %s",
			what, firstLine(lastBytes(string(b), 300)))})
	}
}

// inTurn reports whether a turn is running.
func (s *session) inTurn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn != nil
}

// Send starts a turn: a session/prompt whose response ends it.
func (s *session) Send(ctx context.Context, t provider.Turn) error {
	s.mu.Lock()
	switch {
	case s.closing || s.isDone():
		s.mu.Unlock()
		return provider.ErrClosed
	case s.turn != nil:
		s.mu.Unlock()
		return provider.ErrBusy
	}
	tctx, cancel := context.WithCancel(s.ctx)
	tr := &turn{ctx: tctx, cancel: cancel, ended: make(chan struct{})}
	s.turn = tr
	id := s.id
	s.mu.Unlock()

	if sw := s.sweeper(); sw != nil {
		tr.before = sw.Outsiders()
	}
	params := map[string]any{
		"sessionId": id,
		"prompt":    []map[string]any{{"type": "text", "text": t.Text}},
	}
	err := s.rpc.Call(ctx, "session/prompt", params, func(res json.RawMessage, err error) {
		s.promptDone(tr, res, err)
	})
	if err != nil {
		s.mu.Lock()
		if s.turn == tr {
			s.turn = nil
		}
		s.mu.Unlock()
		cancel()
		return fmt.Errorf("copilot: %w", err)
	}
	return nil
}

// promptDone ends the turn with session/prompt's answer (on the reader),
// unless the session's end ended it first.
func (s *session) promptDone(t *turn, res json.RawMessage, err error) {
	s.mu.Lock()
	current := s.turn == t
	s.mu.Unlock()
	if !current {
		return
	}
	s.flushText()
	ev := provider.TurnEnded{Result: s.rs.lastText}
	var r struct {
		StopReason string       `json:"stopReason"`
		Usage      *promptUsage `json:"usage"`
	}
	if err == nil {
		if jerr := json.Unmarshal(res, &r); jerr != nil {
			err = fmt.Errorf("bad session/prompt result: %w", jerr)
		}
	}
	if r.Usage != nil {
		if u, ok := s.rs.usageDelta(*r.Usage); ok {
			s.h.Event(u)
		}
	}
	switch {
	case err != nil:
		s.endOpenTools("the turn failed")
		ev.Err = fmt.Errorf("copilot: session/prompt failed: %w", err)
	case r.StopReason == "cancelled":
		s.endOpenTools("interrupted")
		ev.Interrupted = true
		ev.ExitCode = -1
	case s.rs.errText != "" && serverErrorText(s.rs.errText):
		s.endOpenTools("the turn failed")
		ev.Err = &provider.TransportError{Reason: "copilot: " + s.rs.errText}
	case s.rs.errText != "" && rateLimitText(s.rs.errText):
		// Copilot gives no reset time: the fleet chooses the wait.
		s.endOpenTools("the turn failed")
		ev.Err = &provider.RateLimitError{Reason: "copilot: " + s.rs.errText}
	case s.rs.errText != "":
		s.endOpenTools("the turn failed")
		ev.Err = errors.New("copilot: " + s.rs.errText)
	case r.StopReason == "end_turn" || r.StopReason == "":
		s.endOpenTools("the turn ended first")
	default: // max_tokens, max_turn_requests, refusal
		s.endOpenTools("the turn ended first")
		ev.Err = fmt.Errorf("copilot: the turn stopped: %s", r.StopReason)
	}
	if ev.Interrupted || t.interrupted.Load() {
		ev.Interrupted = true
		if sw := s.sweeper(); sw != nil {
			if n := sw.SweepOutsiders(t.before); n > 0 {
				s.h.Event(provider.Note{Text: fmt.Sprintf("copilot: ended %d process(es) the interrupted turn left running", n)})
			}
		}
	}
	s.endTurn(t, ev)
}

// endTurn clears the turn, sends TurnEnded and marks it ended.
func (s *session) endTurn(t *turn, ev provider.TurnEnded) {
	s.rs.resetTurn()
	s.mu.Lock()
	if s.turn == t {
		s.turn = nil
	}
	s.mu.Unlock()
	t.cancel()
	s.h.Event(ev)
	close(t.ended)
}

// Interrupt cancels the running turn (ACP session/cancel: Copilot stops
// the model and kills the running command) and waits for its end, which
// also ends what the turn started outside the CLI.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	t, id := s.turn, s.id
	s.mu.Unlock()
	if t == nil {
		return nil
	}
	s.cancelTurn(t, id)
	select {
	case <-t.ended:
		return nil
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelTurn sends session/cancel and answers the turn's pending
// permission prompts "cancelled", as ACP requires.
func (s *session) cancelTurn(t *turn, id string) {
	if t.interrupted.Swap(true) {
		return
	}
	t.cancel()
	_ = s.rpc.Notify(context.Background(), "session/cancel", map[string]any{"sessionId": id})
}

// ResumeID is the ACP session id.
func (s *session) ResumeID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Done is closed once the session ended.
func (s *session) Done() <-chan struct{} { return s.done }

// Err says why the session ended when it was not by Close.
func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close interrupts a running turn, closes stdin (the CLI then exits), and
// ends the process tree. It returns when nothing of the session is left.
func (s *session) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *session) close() error {
	s.mu.Lock()
	s.closing = true
	t, id := s.turn, s.id
	s.mu.Unlock()
	if t != nil {
		s.cancelTurn(t, id)
		select {
		case <-t.ended:
		case <-s.done:
		case <-time.After(cancelWait):
		}
	}
	s.cli.Stop()
	var err error
	select {
	case <-s.done:
	case <-time.After(killWait):
		err = errors.New("copilot: the CLI's output did not end after it was killed")
	}
	s.finish()
	if a, ok := s.cli.Process().(interface{ Alive() []int }); ok {
		if left := a.Alive(); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("copilot: processes %v of the session are still alive", left))
		}
	}
	return err
}

// turnSweeper is what ending an interrupted turn needs of the CLI's
// process: the processes of its tree outside the CLI's own group, and a
// way to end the ones a turn added. A local agentcli.Proc is one (on
// Linux; elsewhere it finds none, and Close ends them).
type turnSweeper interface {
	Outsiders() map[int]bool
	SweepOutsiders(before map[int]bool) int
}

func (s *session) sweeper() turnSweeper {
	if s.cli == nil {
		return nil
	}
	sw, _ := s.cli.Process().(turnSweeper)
	return sw
}

var _ provider.Session = (*session)(nil)
