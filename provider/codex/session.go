package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
)

const (
	// maxLine is the longest stdout line accepted; a longer one ends the
	// session with a protocol error (never an allocation beyond it).
	maxLine = 8 << 20
	// stderrTail is how much of the CLI's stderr is kept for errors.
	stderrTail = 8 << 10
	// errTail is how much of that tail an error message quotes.
	errTail = 2000
	// exitGrace is how long the CLI may take to exit after closing stdout
	// or stdin before its tree is killed.
	exitGrace = 3 * time.Second
	// interruptGrace is how long Close waits for an interrupted turn to end.
	interruptGrace = 5 * time.Second
	// drainGrace is how long stderr may stay open after the tree is gone
	// (a process outside it could hold it).
	drainGrace = 2 * time.Second
)

// optOut are the notifications the adapter does not use, which the CLI
// then does not send: streaming deltas (whole items come in item/completed)
// and status chatter.
var optOut = []string{
	"item/agentMessage/delta",
	"item/plan/delta",
	"item/reasoning/summaryTextDelta",
	"item/reasoning/summaryPartAdded",
	"item/reasoning/textDelta",
	"item/commandExecution/outputDelta",
	"item/fileChange/outputDelta",
	"command/exec/outputDelta",
	"process/outputDelta",
	"account/rateLimits/updated",
	"remoteControl/status/changed",
	"thread/status/changed",
	"turn/diff/updated",
}

// session is one `codex app-server` process and the thread it runs.
//
// Events are emitted only from the stdout reader goroutine (readLoop), in
// stream order; prompts run on goroutines of their own and only write
// answers. Lock order: mu, then writer.mu; never call the Host holding mu.
type session struct {
	p    *Provider
	h    provider.Host
	spec provider.Spec
	cmd  *exec.Cmd
	tree *proctree.Tree
	mcp  map[string]bool // config keys of the fleet's MCP servers

	in         *writer
	stdout     *os.File
	stderr     *os.File
	tail       tailBuffer
	stderrDone chan struct{}
	exited     chan struct{} // closed once cmd.Wait returned
	waitErr    error         // cmd.Wait's result; read after exited

	ctx    context.Context // ends with the session: prompts stop waiting
	cancel context.CancelFunc
	nextID atomic.Int64

	mu       sync.Mutex
	pending  map[int64]func(reply)         // our requests awaiting a response
	prompts  map[string]context.CancelFunc // open server requests by JSON id
	threadID string
	turn     *turn // the running turn; nil between turns
	closing  bool  // Close (or a failed Start) is ending the session
	ended    bool  // the reader finished
	err      error // why the session ended, when not by Close

	done      chan struct{} // closed when the reader finished
	promptsWG sync.WaitGroup
	closeOnce sync.Once

	rd readState // owned by the reader goroutine
}

// turn is one Send's turn. Fields other than ended/ctx are guarded by
// session.mu.
type turn struct {
	id              string // Codex's turn id; "" until turn/start answered
	interruptWanted bool   // Interrupt came before the id
	interruptSent   bool
	finished        bool // TurnEnded was (being) emitted
	ended           chan struct{}
	ctx             context.Context // the turn's prompts; ends with the turn
	cancel          context.CancelFunc
}

// threadParams are thread/start's and thread/resume's parameters.
type threadParams struct {
	ThreadID              string `json:"threadId,omitempty"`
	Cwd                   string `json:"cwd,omitempty"`
	ApprovalPolicy        string `json:"approvalPolicy,omitempty"`
	Sandbox               string `json:"sandbox,omitempty"`
	Model                 string `json:"model,omitempty"`
	DeveloperInstructions string `json:"developerInstructions,omitempty"`
	ExcludeTurns          bool   `json:"excludeTurns,omitempty"`
}

// reply is the answer to one of our requests.
type reply struct {
	result json.RawMessage
	err    error
}

func startSession(ctx context.Context, p *Provider, spec provider.Spec, h provider.Host, cmd *exec.Cmd, tree *proctree.Tree) (*session, error) {
	s := &session{
		p: p, h: h, spec: spec, cmd: cmd, tree: tree,
		mcp:        map[string]bool{},
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
		pending:    map[int64]func(reply){},
		prompts:    map[string]context.CancelFunc{},
		done:       make(chan struct{}),
	}
	used := map[string]bool{}
	for _, m := range spec.MCP {
		s.mcp[mcpKey(m.Name, used)] = true
	}
	s.rd.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("codex: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("codex: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("codex: stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	startErr := cmd.Start()
	// The child has its own copies; ours close so EOF can arrive.
	inR.Close()
	outW.Close()
	errW.Close()
	if startErr != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		s.cancel()
		return nil, fmt.Errorf("codex: start %s: %w", cmd.Path, startErr)
	}
	s.in = &writer{f: inW}
	s.stdout, s.stderr = outR, errR
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	go s.readStderr()
	go s.readLoop()

	if err := s.initialize(ctx); err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

// initialize runs the handshake and starts or resumes the thread.
func (s *session) initialize(ctx context.Context) error {
	_, err := s.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "agents-fleet", "title": "Agents Fleet", "version": "1"},
		"capabilities": map[string]any{"optOutNotificationMethods": optOut},
	}, nil)
	if err != nil {
		return s.startError("initialize", ctx, err)
	}
	if err := s.notify("initialized", nil); err != nil {
		return s.startError("initialized", ctx, err)
	}
	model := s.spec.Model
	if model == "" {
		model = s.p.opts.Model
	}
	approval := s.p.opts.PermissionMode
	if approval == "" {
		approval = defaultApproval
	}
	params := threadParams{
		Cwd:                   s.spec.Dir,
		ApprovalPolicy:        approval,
		Sandbox:               sandboxMode,
		Model:                 model,
		DeveloperInstructions: s.spec.Instructions,
	}
	method := "thread/start"
	if s.spec.ResumeID != "" {
		method = "thread/resume"
		params.ThreadID = s.spec.ResumeID
		params.ExcludeTurns = true // the history is not needed here
	}
	// The reply is handled on the reader goroutine, so SessionStarted is
	// in stream order with everything else.
	_, err = s.call(ctx, method, params, func(result json.RawMessage) {
		var r struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
			Model string `json:"model"`
		}
		if json.Unmarshal(result, &r) != nil || r.Thread.ID == "" {
			return
		}
		s.mu.Lock()
		s.threadID = r.Thread.ID
		s.mu.Unlock()
		s.rd.sessionID = r.Thread.ID
		s.emit(provider.SessionStarted{ID: r.Thread.ID, Model: r.Model})
	})
	if err != nil {
		return s.startError(method, ctx, err)
	}
	if s.ResumeID() == "" {
		return s.startError(method, ctx, errors.New("the answer has no thread id"))
	}
	return nil
}

// startError describes a failed start-up step: what the CLI said when it
// exited, or that it did not answer in time, with its stderr.
func (s *session) startError(step string, ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("codex app-server did not answer %s: %w%s", step, err, s.tailSuffix())
	}
	return fmt.Errorf("codex app-server %s failed: %w", step, err)
}

func (s *session) tailSuffix() string {
	t := strings.TrimSpace(lastBytes(s.tail.String(), errTail))
	if t == "" {
		return ""
	}
	return "; stderr: " + t
}

// abort ends a session whose start failed.
func (s *session) abort() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.in.close()
		s.tree.Kill(s.cmd)
		<-s.done
		s.cancel()
		s.promptsWG.Wait()
	})
}

// ResumeID is the thread id.
func (s *session) ResumeID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threadID
}

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Send starts a turn with turn/start. It returns once the request is
// written; a turn/start error ends the turn (TurnEnded with the error).
func (s *session) Send(ctx context.Context, t provider.Turn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.ended || s.closing {
		s.mu.Unlock()
		return provider.ErrClosed
	}
	if s.turn != nil {
		s.mu.Unlock()
		return provider.ErrBusy
	}
	tctx, cancel := context.WithCancel(s.ctx)
	tr := &turn{ended: make(chan struct{}), ctx: tctx, cancel: cancel}
	s.turn = tr
	thread := s.threadID
	s.mu.Unlock()

	params := map[string]any{
		"threadId": thread,
		"input":    []map[string]any{{"type": "text", "text": t.Text}},
	}
	err := s.request("turn/start", params, func(r reply) {
		if r.err != nil {
			s.endTurn(tr, provider.TurnEnded{Err: fmt.Errorf("turn/start: %w", r.err)})
			return
		}
		var res struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = json.Unmarshal(r.result, &res)
		s.setTurnID(tr, res.Turn.ID)
	})
	if err != nil {
		s.mu.Lock()
		mine := !tr.finished
		if mine {
			tr.finished = true
			if s.turn == tr {
				s.turn = nil
			}
		}
		s.mu.Unlock()
		if mine {
			cancel()
			if s.isEnded() {
				return provider.ErrClosed
			}
			return fmt.Errorf("codex: send turn: %w", err)
		}
		// The session ended meanwhile and ended the turn with its reason.
	}
	return nil
}

func (s *session) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended || s.closing
}

// setTurnID records Codex's id for tr and sends an interrupt that was
// waiting for it.
func (s *session) setTurnID(tr *turn, id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	if tr.id == "" {
		tr.id = id
	}
	send := tr.interruptWanted && !tr.interruptSent && !tr.finished
	if send {
		tr.interruptSent = true
	}
	s.mu.Unlock()
	if send {
		s.sendInterrupt(tr)
	}
}

// Interrupt sends turn/interrupt and waits (bounded by ctx) for the turn to
// end; the commands the turn left running are ended when it does.
func (s *session) Interrupt(ctx context.Context) error {
	s.mu.Lock()
	tr := s.turn
	if tr == nil || s.ended {
		s.mu.Unlock()
		return nil
	}
	send := false
	if tr.id == "" {
		tr.interruptWanted = true
	} else if !tr.interruptSent {
		tr.interruptSent = true
		send = true
	}
	s.mu.Unlock()
	if send {
		s.sendInterrupt(tr)
	}
	select {
	case <-tr.ended:
		return nil
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) sendInterrupt(tr *turn) {
	s.mu.Lock()
	params := map[string]any{"threadId": s.threadID, "turnId": tr.id}
	s.mu.Unlock()
	_ = s.request("turn/interrupt", params, func(r reply) {
		if r.err != nil && !errors.Is(r.err, provider.ErrClosed) {
			s.emit(provider.Note{Text: "codex: turn/interrupt: " + r.err.Error()})
		}
	})
}

// Close interrupts a running turn, closes the CLI's stdin, gives it a short
// grace to exit and then kills its whole process tree. Idempotent.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		running := s.turn != nil && !s.ended
		s.mu.Unlock()
		if running {
			ctx, cancel := context.WithTimeout(context.Background(), interruptGrace)
			_ = s.Interrupt(ctx)
			cancel()
		}
		s.in.close()
		select {
		case <-s.done:
		case <-time.After(exitGrace):
			s.tree.Kill(s.cmd)
		}
		<-s.done
		s.cancel()
		s.promptsWG.Wait()
	})
	return nil
}

// readLoop reads stdout until it ends, then finishes the session.
func (s *session) readLoop() {
	lr := newLineReader(s.stdout, maxLine)
	var err error
	for {
		var line []byte
		if line, err = lr.Next(); err != nil {
			break
		}
		s.handleLine(line)
	}
	s.finish(err)
}

// finish runs on the reader goroutine once stdout ended (or broke the
// protocol): it makes sure nothing of the process tree is left, records why
// the session ended, fails what waits, ends a running turn and closes done.
func (s *session) finish(readErr error) {
	overlong := errors.Is(readErr, errLineTooLong)
	if overlong {
		s.tree.Kill(s.cmd)
	}
	select {
	case <-s.exited:
	case <-time.After(exitGrace):
	}
	s.tree.Kill(s.cmd) // whatever it started goes with the session
	<-s.exited
	select {
	case <-s.stderrDone:
	case <-time.After(drainGrace):
		s.stderr.Close() // a stray holder keeps it open: stop reading
		<-s.stderrDone
	}
	s.stdout.Close()
	s.in.close()

	s.mu.Lock()
	closing := s.closing
	var why error
	switch {
	case overlong:
		why = fmt.Errorf("codex app-server broke the protocol: %w (the session was ended; %s)%s", readErr, exitText(s.cmd), s.tailSuffix())
	case readErr != nil && readErr != io.EOF && !errors.Is(readErr, os.ErrClosed):
		why = fmt.Errorf("codex app-server: reading its output: %w (%s)%s", readErr, exitText(s.cmd), s.tailSuffix())
	default:
		why = fmt.Errorf("codex app-server exited (%s)%s", exitText(s.cmd), s.tailSuffix())
	}
	if !closing {
		s.err = why
	}
	pending := s.pending
	s.pending = nil
	tr := s.turn
	s.ended = true
	s.mu.Unlock()

	// The turn first, so it ends with why rather than as a failed request.
	if tr != nil {
		ev := provider.TurnEnded{Err: why}
		if closing {
			ev = provider.TurnEnded{Err: provider.ErrClosed, Interrupted: true}
		}
		s.endTurn(tr, ev)
	}
	failWith := why
	if closing {
		failWith = provider.ErrClosed
	}
	for _, cb := range pending {
		cb(reply{err: failWith})
	}
	s.cancel()
	close(s.done)
}

func exitText(cmd *exec.Cmd) string {
	if cmd.ProcessState == nil {
		return "not started"
	}
	return cmd.ProcessState.String()
}

// endTurn emits TurnEnded for tr once: it first completes the tools left
// open and, for an interrupted turn, ends the commands Codex keeps running.
// Reader goroutine only.
func (s *session) endTurn(tr *turn, ev provider.TurnEnded) {
	s.mu.Lock()
	if tr.finished {
		s.mu.Unlock()
		return
	}
	tr.finished = true
	if s.turn == tr {
		s.turn = nil
	}
	s.mu.Unlock()
	s.closeOpenItems(ev.Interrupted)
	if ev.Interrupted {
		killCommands(s.tree.Mark(), s.cmd)
	}
	tr.cancel()
	if ev.Result == "" {
		ev.Result = s.rd.lastText
	}
	s.rd.lastText = ""
	s.emit(ev)
	close(tr.ended)
}

func (s *session) emit(ev provider.Event) { s.h.Event(ev) }

// --- JSON-RPC out ---

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("%s (JSON-RPC error %d)", e.Message, e.Code)
}

type outMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params any             `json:"params,omitempty"`
	Result any             `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// request writes a request; cb runs on the reader goroutine with the reply
// (or the session's end).
func (s *session) request(method string, params any, cb func(reply)) error {
	id := s.nextID.Add(1)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		return provider.ErrClosed
	}
	s.pending[id] = cb
	s.mu.Unlock()
	err := s.write(outMessage{ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: params})
	if err != nil {
		s.mu.Lock()
		if s.pending != nil {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}
	return err
}

// call is a request that waits for its reply. onResult, when set, runs on
// the reader goroutine with a successful result before call returns.
func (s *session) call(ctx context.Context, method string, params any, onResult func(json.RawMessage)) (json.RawMessage, error) {
	ch := make(chan reply, 1)
	err := s.request(method, params, func(r reply) {
		if r.err == nil && onResult != nil {
			onResult(r.result)
		}
		ch <- r
	})
	if err != nil {
		// A write fails when the CLI is gone: say why it went.
		select {
		case <-s.done:
		case <-ctx.Done():
		case <-time.After(exitGrace):
		}
		return nil, s.endedErr(err)
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		select {
		case r := <-ch:
			return r.result, r.err
		default:
			return nil, s.endedErr(provider.ErrClosed)
		}
	}
}

// endedErr prefers the session's own end reason over a write error.
func (s *session) endedErr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return err
}

func (s *session) notify(method string, params any) error {
	return s.write(outMessage{Method: method, Params: params})
}

func (s *session) respond(id json.RawMessage, result any) {
	if result == nil {
		result = map[string]any{}
	}
	_ = s.write(outMessage{ID: id, Result: result})
}

func (s *session) respondError(id json.RawMessage, code int, msg string) {
	_ = s.write(outMessage{ID: id, Error: &rpcError{Code: code, Message: msg}})
}

func (s *session) write(m outMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("codex: encode %s: %w", m.Method, err)
	}
	return s.in.write(append(b, '\n'))
}

// writer serialises writes to the CLI's stdin.
type writer struct {
	mu     sync.Mutex
	f      *os.File
	closed atomic.Bool
}

func (w *writer) write(b []byte) error {
	if w.closed.Load() {
		return provider.ErrClosed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.f.Write(b)
	return err
}

// close closes stdin without waiting for a write in progress (the close
// ends it).
func (w *writer) close() {
	if w.closed.CompareAndSwap(false, true) {
		w.f.Close()
	}
}

// --- stderr ---

func (s *session) readStderr() {
	defer close(s.stderrDone)
	buf := make([]byte, 4096)
	for {
		n, err := s.stderr.Read(buf)
		if n > 0 {
			s.tail.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= stderrTail {
		t.buf = append(t.buf[:0], p[len(p)-stderrTail:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
