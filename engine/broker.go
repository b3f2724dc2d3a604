package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

const (
	kindConfirm = "confirm"
	kindAsk     = "ask"
)

// request is a pending confirm or ask.
type request struct {
	id       string
	kind     string
	summary  string            // confirm
	question provider.Question // ask
	taskID   string            // "" for the coordinator's
	agent    string            // who asked: "w3", "coordinator"
	// topic is what a decision is about when it is not a tool or command
	// the agent wants to run: "budget" (raise it?), "push" (/pr); it
	// becomes the steering source's prefix in the intel store.
	topic string
	// allowValue and denyValue are a permission ask's choices that a plain
	// confirmResponse picks; "" for other asks.
	allowValue, denyValue string
	ts                    int64
	done                  chan answer // cap 1; receives exactly one answer
	timer                 *time.Timer
}

type answer struct {
	ok      bool // false: expired or cancelled, no answer
	approve bool
	text    string
	confirm bool // the answer came as a confirmResponse
}

// broker holds pending requests. The first answer wins, from any surface;
// everything it does happens under Engine.mu.
type broker struct {
	e        *Engine
	next     int
	pending  map[string]*request
	order    []string                           // ids in creation order
	resolved map[string]protocol.ResolvedReason // recently resolved id → how, for clear errors
	recent   []string                           // resolved ids, oldest first (bounds resolved)
}

const rememberResolved = 1024

func (b *broker) init(e *Engine) {
	b.e = e
	b.pending = make(map[string]*request)
	b.resolved = make(map[string]protocol.ResolvedReason)
}

// raise publishes a request for h's task, marks the task blocked while it
// waits, and blocks until it is answered, expires, or ctx ends.
func (b *broker) raise(ctx context.Context, h *host, r request) (answer, error) {
	e := b.e
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return answer{}, provider.ErrNoAnswer
	}
	if len(b.pending) >= e.cfg.MaxPending {
		e.mu.Unlock()
		h.Event(provider.Note{Text: fmt.Sprintf("too many pending requests (%d); this %s was refused", e.cfg.MaxPending, r.kind)})
		return answer{}, provider.ErrNoAnswer
	}
	b.next++
	e.saveCounterLocked(counterRequest, b.next)
	r.id = fmt.Sprintf("%s-%s-%d", r.kind, shortID(e.cfg.SessionID), b.next)
	r.taskID = h.taskID()
	r.agent = h.agent
	r.ts = nowMs()
	r.done = make(chan answer, 1)
	b.pending[r.id] = &r
	b.order = append(b.order, r.id)
	id := r.id
	r.timer = time.AfterFunc(e.cfg.RequestTTL, func() { b.expire(id) })
	if r.kind == kindConfirm {
		e.pub.Broadcast(&protocol.ConfirmRequest{ID: r.id, Summary: protocol.CutText(r.summary, maxRequestText), Ts: r.ts})
	} else {
		m := &protocol.AskRequest{ID: r.id, Question: protocol.CutText(r.question.Text, maxRequestText), Kind: r.question.Kind, Ts: r.ts}
		for _, c := range r.question.Choices {
			m.Choices = append(m.Choices, protocol.AskChoiceOption{Label: protocol.CutText(c.Label, maxRequestText),
				Value: c.Value, Description: protocol.CutText(c.Description, maxRequestText)})
		}
		if len(r.question.Choices) > 0 {
			m.AllowFreeform = protocol.Bool(r.question.AllowFreeform)
		}
		e.pub.Broadcast(m)
	}
	if h.t != nil {
		h.w.status = workerIdle
		e.setTaskLocked(h.t, taskBlocked, "waiting for an answer to "+r.id)
	} else {
		e.changedLocked()
	}
	e.mu.Unlock()

	var ans answer
	select {
	case ans = <-r.done:
	case <-ctx.Done():
		e.mu.Lock()
		b.resolveLocked(id, answer{}, protocol.ReasonCancelled)
		e.mu.Unlock()
		ans = <-r.done
	}

	e.mu.Lock()
	// A task whose request ended because the task itself is being stopped
	// stays blocked until it settles; otherwise it runs on.
	if h.t != nil && h.t.status == taskBlocked && ctx.Err() == nil {
		h.w.status = workerRunning
		e.setTaskLocked(h.t, taskRunning, "")
	}
	e.mu.Unlock()
	if !ans.ok {
		return ans, provider.ErrNoAnswer
	}
	return ans, nil
}

// answer resolves a request with an operator's answer. An answer it does
// not take is refused with the *protocol.Error frame the answering client
// gets: its code says whether the request was already resolved, is
// unknown, or does not take that answer.
func (b *broker) answer(id string, a answer, reason protocol.ResolvedReason) error {
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	r := b.pending[id]
	if r == nil {
		refuse := func(code, format string, args ...any) error {
			return &protocol.Error{Message: fmt.Sprintf(format, args...), Code: code, ID: truncateID(id)}
		}
		if how, ok := b.resolved[id]; ok {
			return refuse(protocol.ErrCodeRequestResolved, "request %s was already resolved: %s", id, describeResolution(how))
		}
		if b.issuedLocked(id) {
			return refuse(protocol.ErrCodeRequestResolved, "request %s was already resolved earlier (before this fleet process, or long ago)", id)
		}
		return refuse(protocol.ErrCodeRequestUnknown, "no pending request with id %q", truncateID(id))
	}
	invalid := func(err error) error {
		return &protocol.Error{Message: err.Error(), Code: protocol.ErrCodeAnswerInvalid, ID: id}
	}
	if a.confirm && r.kind == kindAsk && r.allowValue != "" {
		// A permission prompt with the CLI's choices also takes a plain
		// yes (allow once) or no (deny).
		text := r.denyValue
		if a.approve {
			text = r.allowValue
		}
		a = answer{text: text}
	}
	if a.confirm != (r.kind == kindConfirm) {
		if r.kind == kindConfirm {
			return invalid(fmt.Errorf("%s is a confirm request: answer it with confirmResponse", id))
		}
		return invalid(fmt.Errorf("%s is an ask request: answer it with askResponse", id))
	}
	if r.kind == kindAsk {
		if err := checkChoice(r.question, a.text); err != nil {
			return invalid(fmt.Errorf("%s: %w", id, err))
		}
	}
	a.ok = true
	e.steerAnswerLocked(r, a)
	b.resolveLocked(id, a, reason)
	return nil
}

func checkChoice(q provider.Question, text string) error {
	if len(q.Choices) == 0 || q.AllowFreeform {
		return nil
	}
	values := make([]string, len(q.Choices))
	for i, c := range q.Choices {
		if c.Value == text {
			return nil
		}
		values[i] = c.Value
	}
	return fmt.Errorf("answer must be one of: %s", strings.Join(values, ", "))
}

// describeResolution says how a request was resolved, for an answer that
// came too late.
func describeResolution(how protocol.ResolvedReason) string {
	switch how {
	case protocol.ReasonAnswered:
		return "answered from a console"
	case protocol.ReasonSuperseded:
		return "answered elsewhere first (the fleet's terminal), or no longer needed"
	case protocol.ReasonExpired:
		return "expired: nobody answered within the request TTL (fleet run --request-ttl)"
	case protocol.ReasonCancelled:
		return "cancelled: its task ended, or the fleet was shutting down"
	}
	return string(how)
}

// issuedLocked reports whether id is one this session raised (ids are
// <kind>-<session>-<n>, n counted across resumes): one that is not pending
// and not remembered was resolved before this process or long ago.
func (b *broker) issuedLocked(id string) bool {
	for _, kind := range []string{kindConfirm, kindAsk} {
		rest, ok := strings.CutPrefix(id, kind+"-"+shortID(b.e.cfg.SessionID)+"-")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		return err == nil && n >= 1 && n <= b.next && strconv.Itoa(n) == rest
	}
	return false
}

func (b *broker) expire(id string) {
	b.e.mu.Lock()
	defer b.e.mu.Unlock()
	b.resolveLocked(id, answer{}, protocol.ReasonExpired)
}

// resolveLocked ends a pending request: hands the waiting task its answer
// and tells every client. A no-op for an id that is not pending.
func (b *broker) resolveLocked(id string, a answer, reason protocol.ResolvedReason) {
	r := b.pending[id]
	if r == nil {
		return
	}
	delete(b.pending, id)
	for i, v := range b.order {
		if v == id {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	r.timer.Stop()
	b.remember(id, reason)
	r.done <- a
	// An answered ask counts as approved, but a permission ask answered
	// with its deny choice does not.
	approved := a.ok && (a.approve || r.kind == kindAsk && (r.denyValue == "" || a.text != r.denyValue))
	b.e.pub.Broadcast(&protocol.ConfirmResolved{ID: id, Approved: approved, Kind: protocol.ResolvedKind(r.kind), Reason: reason})
	b.e.changedLocked()
}

func (b *broker) remember(id string, how protocol.ResolvedReason) {
	b.resolved[id] = how
	b.recent = append(b.recent, id)
	if len(b.recent) > rememberResolved {
		delete(b.resolved, b.recent[0])
		b.recent = b.recent[1:]
	}
}

// cancelForTaskLocked cancels the requests of a task that ended.
func (b *broker) cancelForTaskLocked(taskID string) {
	for _, id := range append([]string(nil), b.order...) {
		if r := b.pending[id]; r != nil && r.taskID == taskID {
			b.resolveLocked(id, answer{}, protocol.ReasonCancelled)
		}
	}
}

// cancelAllLocked cancels every pending request (shutdown).
func (b *broker) cancelAllLocked() {
	for _, id := range append([]string(nil), b.order...) {
		b.resolveLocked(id, answer{}, protocol.ReasonCancelled)
	}
}

// pendingLocked returns the pending requests in creation order.
func (b *broker) pendingLocked() []*request {
	out := make([]*request, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.pending[id])
	}
	return out
}

func shortID(s string) string {
	if len(s) > 6 {
		return s[:6]
	}
	return s
}

func truncateID(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
