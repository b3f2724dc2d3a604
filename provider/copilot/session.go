package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
)

const (
	// protocolVersion is the ACP version the adapter speaks.
	protocolVersion = 1
	// stderrTail is how much of the CLI's stderr is kept for errors.
	stderrTail = 8 << 10

	// cancelWait bounds how long Close waits for an interrupted turn's
	// end before it stops the CLI.
	cancelWait = 5 * time.Second
	// exitGrace is how long Close waits for the CLI to exit after stdin
	// closes (it exits at once: "ACP client disconnected").
	exitGrace = 3 * time.Second
	// killWait bounds the wait for the reader after the tree was killed.
	killWait = 10 * time.Second
	// pipeGrace is how long the reader waits, after the CLI exited, for a
	// pipe a descendant still holds before the tree is killed.
	pipeGrace = 2 * time.Second
)

// sessionConfig is what Start hands a session.
type sessionConfig struct {
	spec    provider.Spec
	host    provider.Host
	cmd     *exec.Cmd
	tree    *proctree.Tree
	scratch string // removed when the session ends
	model   string
}

// session is one `copilot --acp` process and its ACP session.
type session struct {
	cfg  sessionConfig
	h    provider.Host
	w    *writer
	tail *tailBuffer

	// ctx ends (cancel) when the session ends; permission prompts use it.
	ctx    context.Context
	cancel context.CancelFunc

	loading atomic.Bool // session/load is replaying history

	done     chan struct{} // closed when the reader finished: the session ended
	exited   chan struct{} // closed when the CLI process was reaped
	exitErr  error         // cmd.Wait's error; written before exited closes, read after
	stderrOK chan struct{} // closed when stderr reached EOF

	perms     sync.WaitGroup // permission prompts in flight
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards the fields below; never held across Host calls or writes
	id      string     // the ACP session id
	nextID  int64
	calls   map[int64]*pendingCall
	turn    *turn // the running turn, nil between turns
	closing bool  // Close started
	err     error // why the session ended, when not by Close

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

// pendingCall is a request the adapter sent and awaits the answer of.
// onResult, when set, runs on the reader goroutine before the answer is
// delivered, so its events keep their order with the stream's.
type pendingCall struct {
	method   string
	ch       chan callResult
	onResult func(result json.RawMessage, err error)
}

type callResult struct {
	result json.RawMessage
	err    error
}

// startSession starts the CLI, initialises ACP and opens (or loads) the
// session. On any error nothing of the session is left.
func startSession(ctx context.Context, cfg sessionConfig) (*session, error) {
	s := &session{
		cfg:      cfg,
		h:        cfg.host,
		tail:     &tailBuffer{max: stderrTail},
		calls:    map[int64]*pendingCall{},
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		stderrOK: make(chan struct{}),
	}
	s.rs.tools = map[string]*toolCall{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.spawn(); err != nil {
		s.cancel()
		_ = os.RemoveAll(cfg.scratch)
		return nil, err
	}
	if err := s.handshake(ctx); err != nil {
		err = s.startError(err) // before abort: whether the CLI died on its own
		s.abort()
		return nil, err
	}
	return s, nil
}

// spawn starts the process with its pipes and the goroutines that read
// them and reap it.
func (s *session) spawn() error {
	cmd := s.cfg.cmd
	// Own pipes rather than StdinPipe/StdoutPipe: the reader reads until
	// EOF, which a descendant holding the pipe can delay past the CLI's
	// exit, and cmd.Wait must not close the pipe under the reader; stdin's
	// write end takes write deadlines.
	var pipes [6]*os.File // in r/w, out r/w, err r/w
	for i := 0; i < len(pipes); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range pipes[:i] {
				f.Close()
			}
			return fmt.Errorf("copilot: %w", err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err := cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return fmt.Errorf("copilot: start %s: %w", cmd.Path, err)
	}
	s.w = &writer{w: inW}
	go s.reap()
	go s.readStderr(errR)
	go s.read(outR)
	return nil
}

// reap waits for the CLI to exit, then ends whatever it left running: a
// tool's command lives on in a session of its own after its CLI died.
func (s *session) reap() {
	err := s.cfg.cmd.Wait()
	s.exitErr = err
	close(s.exited)
	s.cfg.tree.Kill(s.cfg.cmd)
}

func (s *session) readStderr(r *os.File) {
	defer close(s.stderrOK)
	defer r.Close()
	_, _ = io.Copy(s.tail, r)
}

// handshake sends initialize, then session/new or session/load.
func (s *session) handshake(ctx context.Context) error {
	res, err := s.await(ctx, "initialize", map[string]any{
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
		_, err := s.await(ctx, "session/load", map[string]any{
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
	_, err = s.await(ctx, "session/new", map[string]any{"cwd": s.cwd(), "mcpServers": []any{}},
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
	if d := s.cfg.cmd.Dir; d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			return abs
		}
		return d
	}
	d, _ := os.Getwd()
	return d
}

// call sends a request and returns the channel its answer arrives on.
func (s *session) call(method string, params any, onResult func(json.RawMessage, error)) (int64, <-chan callResult, error) {
	s.mu.Lock()
	if s.isDone() {
		s.mu.Unlock()
		return 0, nil, provider.ErrClosed
	}
	s.nextID++
	id := s.nextID
	pc := &pendingCall{method: method, ch: make(chan callResult, 1), onResult: onResult}
	s.calls[id] = pc
	s.mu.Unlock()
	if err := s.w.send(request{JSONRPC: "2.0", ID: id, Method: method, Params: params}); err != nil {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
		return 0, nil, fmt.Errorf("write %s: %w", method, err)
	}
	return id, pc.ch, nil
}

// await is call and a wait for the answer, ctx's end, or the session's.
func (s *session) await(ctx context.Context, method string, params any, onResult func(json.RawMessage, error)) (json.RawMessage, error) {
	_, ch, err := s.call(method, params, onResult)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
	var answered *rpcError // the CLI answered: it is alive
	if !errors.As(err, &answered) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		select {
		case <-s.exited:
		case <-time.After(pipeGrace):
		}
	}
	if isClosed(s.exited) {
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

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// exitDescription says how the CLI ended, with its stderr's tail. exited
// must be closed.
func (s *session) exitDescription() string {
	<-s.stderrDone()
	var b strings.Builder
	b.WriteString("the CLI ")
	switch err := s.exitErr; {
	case err == nil:
		b.WriteString("exited with status 0")
	default:
		b.WriteString("ended: ")
		b.WriteString(err.Error())
	}
	if t := s.stderr(); t != "" {
		b.WriteString("; stderr: ")
		b.WriteString(t)
	} else {
		b.WriteString("; no stderr")
	}
	return b.String()
}

// stderrDone is stderrOK, or a closed channel after a short grace: a
// descendant may hold stderr open after the CLI exited.
func (s *session) stderrDone() <-chan struct{} {
	select {
	case <-s.stderrOK:
		return s.stderrOK
	case <-time.After(pipeGrace):
		c := make(chan struct{})
		close(c)
		return c
	}
}

func (s *session) stderr() string {
	return strings.TrimSpace(s.tail.String())
}

// abort ends a session that failed to start: kill, wait, clean up.
func (s *session) abort() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.w.close()
	s.cfg.tree.Kill(s.cfg.cmd)
	select {
	case <-s.done:
	case <-time.After(killWait):
	}
	s.finish()
}

// finish releases what a session holds once it ended.
func (s *session) finish() {
	s.cancel()
	s.perms.Wait()
	s.cfg.tree.Kill(s.cfg.cmd)
	_ = os.RemoveAll(s.cfg.scratch)
}

// read is the reader goroutine: it reads the CLI's stdout line by line and
// handles each message, then ends the session when the stream ends.
func (s *session) read(r *os.File) {
	lr := newLineReader(r, maxLine)
	var readErr error
	for {
		line, err := lr.Next()
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		s.handleLine(line)
	}
	if readErr != nil {
		s.cfg.tree.Kill(s.cfg.cmd) // a protocol error ends the CLI
	}
	// Wait for the exit; a CLI that closed its stdout but lives on is
	// ended.
	select {
	case <-s.exited:
	case <-time.After(pipeGrace):
		s.cfg.tree.Kill(s.cfg.cmd)
		<-s.exited
	}
	r.Close()
	s.end(readErr)
}

// end runs on the reader once the stream is over: it ends a running turn
// and any pending call with the reason, and marks the session done.
func (s *session) end(readErr error) {
	s.mu.Lock()
	closing := s.closing
	t := s.turn
	calls := s.calls
	s.calls = map[int64]*pendingCall{}
	s.mu.Unlock()

	var why error
	switch {
	case readErr != nil && errors.Is(readErr, errLineTooLong):
		why = fmt.Errorf("copilot: %w; the session was stopped (%s)", readErr, s.exitDescription())
	case readErr != nil:
		why = fmt.Errorf("copilot: reading the CLI's output: %v (%s)", readErr, s.exitDescription())
	case closing:
		why = provider.ErrClosed
	default:
		why = fmt.Errorf("copilot: %s", s.exitDescription())
	}
	for _, pc := range calls {
		if pc.method == "session/prompt" {
			continue // the turn is ended below
		}
		if pc.onResult != nil {
			pc.onResult(nil, why)
		}
		pc.ch <- callResult{err: why}
	}
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

// handleLine decodes one line's envelope and hands it to its handler.
// session/update notifications, nine lines in ten, take a faster path
// (updateLine).
func (s *session) handleLine(line []byte) {
	if len(line) == 0 {
		return
	}
	if s.updateLine(line) {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		s.garbage("line", line)
		return
	}
	switch {
	case m.isResponse():
		s.handleResponse(&m)
	case m.isNotification():
		if m.Method == "session/update" {
			s.handleUpdateParams(m.Params)
			return
		}
		s.rs.unknown++
	case m.isRequest():
		s.handleRequest(&m)
	default:
		s.garbage("message", line)
	}
}

// garbage counts a line that is not what it should be; the first one is
// reported as a Note.
func (s *session) garbage(what string, b []byte) {
	s.rs.garbageLines++
	if s.rs.garbageLines == 1 {
		s.h.Event(provider.Note{Text: fmt.Sprintf("copilot printed a %s that is not valid ACP, ignored (further ones are counted, not shown): %s",
			what, firstLine(lastBytes(string(b), 300)))})
	}
}

func (s *session) handleResponse(m *message) {
	id, ok := parseID(m.ID)
	if !ok {
		s.rs.unknown++
		return
	}
	s.mu.Lock()
	pc := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if pc == nil {
		s.rs.unknown++ // an answer to nothing pending
		return
	}
	var err error
	if m.Error != nil {
		err = m.Error
	}
	if pc.onResult != nil {
		pc.onResult(m.Result, err)
	}
	pc.ch <- callResult{result: m.Result, err: err}
}

// handleRequest answers an agent→client request: a permission prompt goes
// to the host, anything else gets method-not-found at once.
func (s *session) handleRequest(m *message) {
	if m.Method == "session/request_permission" {
		s.permission(m.ID, m.Params)
		return
	}
	s.rs.unknown++
	_ = s.w.send(response{JSONRPC: "2.0", ID: m.ID, Error: &rpcError{Code: codeMethodNotFound, Message: "the fleet's client does not offer " + m.Method}})
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

	tr.before = outsiders(s.cfg.tree, s.cfg.cmd)
	params := map[string]any{
		"sessionId": id,
		"prompt":    []map[string]any{{"type": "text", "text": t.Text}},
	}
	_, _, err := s.call("session/prompt", params, func(res json.RawMessage, err error) {
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

// promptDone ends the turn with session/prompt's answer (on the reader).
func (s *session) promptDone(t *turn, res json.RawMessage, err error) {
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
		if n := sweepTurn(s.cfg.tree, s.cfg.cmd, t.before); n > 0 {
			s.h.Event(provider.Note{Text: fmt.Sprintf("copilot: ended %d process(es) the interrupted turn left running", n)})
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
	_ = s.w.send(notification{JSONRPC: "2.0", Method: "session/cancel", Params: map[string]any{"sessionId": id}})
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
	s.w.close()
	select {
	case <-s.done:
	case <-time.After(exitGrace):
		s.cfg.tree.Kill(s.cfg.cmd)
	}
	var err error
	select {
	case <-s.done:
	case <-time.After(killWait):
		err = errors.New("copilot: the CLI's output did not end after it was killed")
	}
	s.finish()
	if left := s.cfg.tree.Alive(); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("copilot: processes %v of the session are still alive", left))
	}
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return n, nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

var _ provider.Session = (*session)(nil)
