package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

const (
	// maxLine is the longest stdout line accepted; a longer one ends the
	// session with a protocol error (never an allocation beyond it).
	maxLine = 8 << 20
	// errTail is how much of the CLI's stderr tail an error message quotes.
	errTail = 2000
	// interruptGrace is how long Close waits for an interrupted turn to end.
	interruptGrace = 5 * time.Second
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
	"remoteControl/status/changed",
	"thread/status/changed",
	"turn/diff/updated",
}

// session is one `codex app-server` process and the thread it runs.
//
// Events are emitted only from the stdout reader goroutine (the one
// running cli.Read), in stream order; prompts run on goroutines of their
// own and only write answers. Lock order: mu, then the writer's; never
// call the Host holding mu.
type session struct {
	p    *Provider
	h    provider.Host
	spec provider.Spec
	cli  *agentcli.Conn  // the CLI's process; nil in the parse tests
	rpc  *jsonrpc.Client // requests, responses and prompts over its pipes
	mark string          // commandEnv's value on the commands the CLI runs
	mcp  map[string]bool // config keys of the fleet's MCP servers

	ctx    context.Context // ends with the session: prompts stop waiting
	cancel context.CancelFunc

	mu       sync.Mutex
	threadID string
	turn     *turn // the running turn; nil between turns
	closing  bool  // Close (or a failed Start) is ending the session
	ended    bool  // the reader finished
	err      error // why the session ended, when not by Close

	done      chan struct{} // closed when the reader finished
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

// newSession is a session writing to w, without a process yet.
func newSession(p *Provider, spec provider.Spec, h provider.Host, w jsonrpc.LineWriter) *session {
	s := &session{p: p, h: h, spec: spec, mcp: map[string]bool{}, done: make(chan struct{})}
	used := map[string]bool{}
	for _, m := range spec.MCP {
		s.mcp[mcpKey(m.Name, used)] = true
	}
	s.rd.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rpc = jsonrpc.NewClient(w, s, jsonrpc.Options{Notification: isNotification})
	return s
}

// startSession runs a session on the CLI's process, whose commands carry
// mark, through the handshake. On any error nothing of it is left.
func startSession(ctx context.Context, p *Provider, spec provider.Spec, h provider.Host, proc agentcli.Process, mark string) (*session, error) {
	cli := agentcli.NewConn(proc)
	s := newSession(p, spec, h, cli.Stdin())
	s.cli, s.mark = cli, mark
	go func() { s.finish(cli.Read(maxLine, s.handleLine)) }()
	if err := s.initialize(ctx); err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

// initialize runs the handshake and starts or resumes the thread.
func (s *session) initialize(ctx context.Context) error {
	_, err := s.rpc.Await(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "agents-fleet", "title": "Agents Fleet", "version": "1"},
		"capabilities": map[string]any{"optOutNotificationMethods": optOut},
	}, nil)
	if err != nil {
		return s.startError("initialize", ctx, err)
	}
	if err := s.rpc.Notify(ctx, "initialized", nil); err != nil {
		return s.startError("initialized", ctx, err)
	}
	model := s.p.Model(s.spec)
	approval := s.p.Options.PermissionMode
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
	_, err = s.rpc.Await(ctx, method, params, func(result json.RawMessage, err error) {
		if err != nil {
			return
		}
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
	t := strings.TrimSpace(lastBytes(s.cli.Stderr(), errTail))
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
		s.cli.Stdin().Close()
		s.cli.Kill("")
		<-s.done
		s.cancel()
		s.rpc.WaitPrompts()
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
	err := s.rpc.Call(ctx, "turn/start", params, func(result json.RawMessage, err error) {
		if err != nil {
			s.endTurn(tr, provider.TurnEnded{Err: fmt.Errorf("turn/start: %w", err)})
			return
		}
		var res struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = json.Unmarshal(result, &res)
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
	_ = s.rpc.Call(context.Background(), "turn/interrupt", params, func(_ json.RawMessage, err error) {
		if err != nil && !errors.Is(err, provider.ErrClosed) {
			s.emit(provider.Note{Text: "codex: turn/interrupt: " + err.Error()})
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
		s.cli.Stop()
		<-s.done
		s.cancel()
		s.rpc.WaitPrompts()
	})
	return nil
}

// finish runs on the reader goroutine once the CLI's side ended (cli.Read
// returned: nothing of the process tree is left, the pipes are closed): it
// records why the session ended, ends a running turn, fails what waits and
// closes done.
func (s *session) finish(readErr error) {
	s.mu.Lock()
	closing := s.closing
	var why error
	switch {
	case errors.Is(readErr, agentcli.ErrLineTooLong):
		why = fmt.Errorf("codex app-server broke the protocol: %w (the session was ended; %s)%s", readErr, s.cli.ExitText(), s.tailSuffix())
	case readErr != nil:
		why = fmt.Errorf("codex app-server: reading its output: %w (%s)%s", readErr, s.cli.ExitText(), s.tailSuffix())
	default:
		why = fmt.Errorf("codex app-server exited (%s)%s", s.cli.ExitText(), s.tailSuffix())
	}
	if !closing {
		s.err = why
	}
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
	s.rpc.Close(failWith)
	s.cancel()
	close(s.done)
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
		s.sweepCommands()
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
