package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// Token budgets (docs/budgets.md). A worker's tokens are its account as
// fleetState shows it (tokenCount: input + output); the session's are the
// coordinator's and every worker's together. At 80% of a budget the
// operators are told; at 100% the worker's turn is interrupted and it waits
// for a decision before it spends more: a confirmRequest in a legacy
// session, a hold in the native root in a native one. An approval raises
// the budget by its step and the worker goes on in the same agent session.
// Only agent providers' usage counts: the local shell reports no tokens and
// is never held back.

// Budgets are the token budgets of a session; 0 means none.
type Budgets struct {
	WorkerTokens  int64 // each worker's, unless /budget sets its own
	SessionTokens int64 // the session's, coordinator included
}

// Price is what a model's tokens cost, in USD per million tokens.
type Price struct {
	InputPerMTok, OutputPerMTok, CacheReadPerMTok, CacheWritePerMTok float64
}

// activityBudget is the activity event kind of budget notices.
const activityBudget = protocol.HubBudget

// budgetContinue is the turn a worker paused at its budget gets once the
// budget was raised.
const budgetContinue = "You were paused at your token budget, which has now been raised. Continue the task where you left off."

// budgetState is the session's live budgets; guarded by Engine.mu.
type budgetState struct {
	workerDefault int64 // workers without their own budget; Config, then /budget worker
	session       int64 // the session's budget now (approvals raise it)
	sessionStep   int64 // what an approval adds: the budget as configured or last set
	// The session budget levels whose 80% and 100% were announced, so that
	// each is told once per level.
	sessionWarned, sessionHit int64
	// decision is the pending decision on the exhausted session budget;
	// nil when none is pending.
	decision *budgetDecision
	workers  map[string]*workerBudget // by worker id
}

// workerBudget is one worker's budget state.
type workerBudget struct {
	limit       int64 // its own budget, when own
	own         bool  // set by /budget WORKER or raised by an approval; else the default applies
	warned, hit int64 // levels announced
	// pause (cap 1) tells the worker's awaitTurn to interrupt the turn.
	pause chan struct{}
	holds int // native budget holds asked for (reservation ids <task>.b<N>)
	// asking is the summary of its pending budget confirm ("" when none),
	// so that /budget can resolve it when it raises the budget itself.
	asking string
}

// budgetDecision is one pending decision on the session budget; done is
// closed once it is made.
type budgetDecision struct {
	done     chan struct{}
	approved bool
	summary  string // the confirm's summary (legacy sessions)
	reason   string // why the workers that waited fail when it is not approved
}

func (b *budgetState) init(cfg Budgets) {
	b.workerDefault = max(cfg.WorkerTokens, 0)
	b.session = max(cfg.SessionTokens, 0)
	b.sessionStep = b.session
	b.workers = make(map[string]*workerBudget)
}

func (e *Engine) workerBudgetLocked(w *worker) *workerBudget {
	wb := e.budget.workers[w.id]
	if wb == nil {
		wb = &workerBudget{pause: make(chan struct{}, 1)}
		e.budget.workers[w.id] = wb
	}
	return wb
}

// workerLimitLocked is w's budget now; 0 for none.
func (e *Engine) workerLimitLocked(w *worker) int64 {
	if wb := e.budget.workers[w.id]; wb != nil && wb.own {
		return wb.limit
	}
	return e.budget.workerDefault
}

// workerStepLocked is what an approval adds to a worker's budget limit:
// the workers' default budget, else the worker's own budget again.
func (e *Engine) workerStepLocked(limit int64) int64 {
	if e.budget.workerDefault > 0 {
		return e.budget.workerDefault
	}
	return limit
}

// spendsLocked reports whether w's provider spends tokens (not the local
// shell): only those workers are held at a budget.
func (e *Engine) spendsLocked(providerName string) bool {
	return e.providerNameLocked(providerName) != "local"
}

func (e *Engine) workerExhaustedLocked(w *worker) bool {
	limit := e.workerLimitLocked(w)
	return limit > 0 && w.tokens.total() >= limit
}

func (e *Engine) sessionExhaustedLocked() bool {
	return e.budget.session > 0 && e.sessionTokens.total() >= e.budget.session
}

// budgetExhaustedLocked reports whether w may not spend more now.
func (e *Engine) budgetExhaustedLocked(w *worker) bool {
	return e.spendsLocked(w.provider) && (e.workerExhaustedLocked(w) || e.sessionExhaustedLocked())
}

// checkBudgetsLocked is called after h's usage was added to the accounts.
func (e *Engine) checkBudgetsLocked(h *host) {
	if h.w != nil {
		e.checkWorkerLocked(h.w)
	}
	e.checkSessionLocked()
}

// checkWorkerLocked announces 80% of w's budget and pauses a live w that
// reached it.
func (e *Engine) checkWorkerLocked(w *worker) {
	limit := e.workerLimitLocked(w)
	if limit <= 0 || !e.spendsLocked(w.provider) {
		return
	}
	wb := e.workerBudgetLocked(w)
	used := w.tokens.total()
	switch {
	case used >= limit:
		if wb.hit == limit || w.host == nil {
			return
		}
		wb.hit, wb.warned = limit, limit
		e.activityLocked(w.id, activityBudget, fmt.Sprintf("%s reached its token budget (%s of %s tokens); it is paused", w.id, commas(used), commas(limit)))
		e.pauseLocked(w)
	case used*5 >= limit*4 && wb.warned != limit:
		wb.warned = limit
		text := fmt.Sprintf("%s used %d%% of its token budget (%s of %s tokens)", w.id, used*100/limit, commas(used), commas(limit))
		e.activityLocked(w.id, activityBudget, text)
		e.replyLocked(text)
	}
}

// checkSessionLocked announces 80% of the session budget; at 100% it
// pauses every live agent worker and asks for one decision.
func (e *Engine) checkSessionLocked() {
	b := &e.budget
	limit := b.session
	if limit <= 0 {
		return
	}
	used := e.sessionTokens.total()
	switch {
	case used >= limit:
		if b.sessionHit == limit {
			return
		}
		b.sessionHit, b.sessionWarned = limit, limit
		e.activityLocked(coordinatorAgent, activityBudget, fmt.Sprintf("The session reached its token budget (%s of %s tokens); its agent workers are paused", commas(used), commas(limit)))
		for _, w := range e.workers {
			if w.host != nil && e.spendsLocked(w.provider) {
				e.pauseLocked(w)
			}
		}
		e.sessionDecisionLocked()
	case used*5 >= limit*4 && b.sessionWarned != limit:
		b.sessionWarned = limit
		text := fmt.Sprintf("The session used %d%% of its token budget (%s of %s tokens)", used*100/limit, commas(used), commas(limit))
		e.activityLocked(coordinatorAgent, activityBudget, text)
		e.replyLocked(text)
	}
}

// pauseLocked tells w's running turn, if any, to stop.
func (e *Engine) pauseLocked(w *worker) {
	select {
	case e.workerBudgetLocked(w).pause <- struct{}{}:
	default:
	}
}

// budgetPause is the channel on which h's awaitTurn learns that its
// worker reached a budget; nil (never ready) for the coordinator.
func (e *Engine) budgetPause(h *host) <-chan struct{} {
	if h.w == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.workerBudgetLocked(h.w).pause
}

// budgetInterrupt ends a turn whose worker reached a budget. A turn that
// already ended by itself keeps its result; one the CLI did not stop in
// time was cut short with its session.
func (e *Engine) budgetInterrupt(h *host, sess provider.Session) provider.TurnEnded {
	select {
	case res := <-h.turns:
		return res
	default:
	}
	res := e.interruptTurn(h, sess)
	select {
	case <-sess.Done():
		if res.Err == nil {
			res.Interrupted = true
		}
	default:
	}
	return res
}

// budgetPaused reports whether the turn that ended with res was
// interrupted at a budget, so that the worker goes on in the same session
// once the budget gate lets it. It fails when the session did not survive
// the interruption.
func (e *Engine) budgetPaused(ctx context.Context, h *host, sess provider.Session, res provider.TurnEnded) (bool, error) {
	if ctx.Err() != nil || res.Err != nil || !res.Interrupted || h.w == nil {
		return false, nil
	}
	e.mu.Lock()
	exhausted := e.budgetExhaustedLocked(h.w)
	e.mu.Unlock()
	if !exhausted {
		return false, nil
	}
	select {
	case <-sess.Done():
		return false, caused(record.CauseBudget, errors.New("token budget exhausted; the agent session ended when its turn was interrupted"))
	default:
	}
	return true, nil
}

// budgetGate returns once h's worker may spend tokens: at once when no
// budget of it is exhausted, else after an operator raised it (an approved
// confirm, a released native hold). It fails with the budget's reason when
// the decision went the other way (denied, expired, refused by the root)
// and with the cancel's cause when the task was cancelled meanwhile.
// It runs without e.mu.
func (e *Engine) budgetGate(ctx context.Context, h *host) error {
	w := h.w
	for {
		e.mu.Lock()
		if !e.budgetExhaustedLocked(w) {
			select { // a pause for a level that is no longer exhausted
			case <-e.workerBudgetLocked(w).pause:
			default:
			}
			e.mu.Unlock()
			return nil
		}
		var err error
		if e.workerExhaustedLocked(w) {
			err = e.workerDecision(ctx, h) // unlocks e.mu
		} else {
			err = e.sessionDecision(ctx, h) // unlocks e.mu
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cancelled: %w", context.Cause(ctx))
		}
		if err != nil {
			return err
		}
	}
}

// workerDecision asks whether h's worker, at its own budget, may go on,
// and raises its budget when so. e.mu must be held; it is released.
func (e *Engine) workerDecision(ctx context.Context, h *host) error {
	w, wb := h.w, e.workerBudgetLocked(h.w)
	used, limit := w.tokens.total(), e.workerLimitLocked(w)
	raised := raiseTo(limit, e.workerStepLocked(limit), used)
	reason := fmt.Sprintf("token budget exhausted (%s of %s tokens)", commas(used), commas(limit))
	var ok bool
	if e.cfg.Governor != nil {
		wb.holds++
		id := fmt.Sprintf("%s.b%d", h.t.id, wb.holds)
		note := fmt.Sprintf("%s on %s: %s; release to continue with the budget raised to %s", w.id, h.t.id, reason, commas(raised))
		e.mu.Unlock()
		ok = e.budgetHold(ctx, h, id, note)
	} else {
		summary := fmt.Sprintf("%s reached its token budget (%s of %s tokens). Continue with the budget raised to %s?", w.id, commas(used), commas(limit), commas(raised))
		wb.asking = summary
		e.mu.Unlock()
		ans, err := h.raise(ctx, request{kind: kindConfirm, summary: summary, topic: "budget"})
		ok = err == nil && ans.approve
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	wb.asking = ""
	if !ok {
		return caused(record.CauseBudget, errors.New(reason))
	}
	// An operator may have set the budget meanwhile (/budget): theirs stands.
	if e.workerLimitLocked(w) == limit {
		wb.limit, wb.own = raised, true
		e.activityLocked(w.id, activityBudget, fmt.Sprintf("%s's token budget was raised to %s tokens", w.id, commas(raised)))
	}
	return nil
}

// sessionDecision waits, as h's worker, for the decision on the exhausted
// session budget (asking for one when none is pending). e.mu must be held;
// it is released. The worker shows as idle meanwhile, its task blocked.
func (e *Engine) sessionDecision(ctx context.Context, h *host) error {
	d := e.sessionDecisionLocked()
	h.w.status = workerIdle
	e.setTaskLocked(h.t, taskBlocked, "waiting for the decision on the session's token budget")
	e.mu.Unlock()
	select {
	case <-d.done:
	case <-ctx.Done():
	}
	e.mu.Lock()
	if h.t.status == taskBlocked && ctx.Err() == nil {
		h.w.status = workerRunning
		e.setTaskLocked(h.t, taskRunning, "")
	}
	e.mu.Unlock()
	if !d.approved {
		return caused(record.CauseBudget, errors.New(d.reason))
	}
	return nil
}

// sessionDecisionLocked returns the pending decision on the session budget,
// asking for one (a confirmRequest, or a native hold) when none is
// pending. Its goroutine ends with the answer, the request's expiry, or
// Shutdown.
func (e *Engine) sessionDecisionLocked() *budgetDecision {
	b := &e.budget
	if b.decision != nil {
		return b.decision
	}
	used, limit := e.sessionTokens.total(), b.session
	raised := raiseTo(limit, b.sessionStep, used)
	d := &budgetDecision{
		done:    make(chan struct{}),
		summary: fmt.Sprintf("The session reached its token budget (%s of %s tokens). Continue with the budget raised to %s?", commas(used), commas(limit), commas(raised)),
		reason:  fmt.Sprintf("session token budget exhausted (%s of %s tokens)", commas(used), commas(limit)),
	}
	if e.closing {
		close(d.done)
		return d
	}
	b.decision = d
	var holdID string
	if e.cfg.Governor != nil {
		e.broker.next++ // a session-wide id that survives a resume
		e.saveCounterLocked(counterRequest, e.broker.next)
		holdID = fmt.Sprintf("budget.%d", e.broker.next)
	}
	e.changedLocked()
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		var ok bool
		if holdID != "" {
			ok = e.budgetHold(context.Background(), nil, holdID, fmt.Sprintf("the session: %s; release to continue with the budget raised to %s", d.reason, commas(raised)))
		} else {
			ans, err := e.broker.raise(context.Background(), newHost(e, nil, nil, context.Background()), request{kind: kindConfirm, summary: d.summary, topic: "budget"})
			ok = err == nil && ans.approve
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if ok && b.session == limit {
			b.session = raised
			e.activityLocked(coordinatorAgent, activityBudget, fmt.Sprintf("The session's token budget was raised to %s tokens", commas(raised)))
		}
		d.approved = ok
		b.decision = nil
		close(d.done)
		e.changedLocked()
		e.dispatchLocked()
	}()
	return d
}

// budgetHoldsLocked reports whether t must wait to start: the session
// budget is exhausted and its decision pending. The local shell never
// waits.
func (e *Engine) budgetHoldsLocked(t *task) bool {
	const why = "waits for the decision on the session's token budget"
	held := e.budget.decision != nil && e.spendsLocked(t.provider)
	if held != (t.waitReason == why) {
		t.waitReason = ""
		if held {
			t.waitReason = why
		}
		e.changedLocked()
	}
	return held
}

// budgetHold holds reservation id in the native root with reason and
// waits until an operator releases it (true) or the root refuses it, the
// task is cancelled or the fleet shuts down (false). h is the worker that
// waits, shown idle meanwhile; nil for the session's hold.
func (e *Engine) budgetHold(ctx context.Context, h *host, id, reason string) bool {
	g := e.cfg.Governor
	who := "The session"
	if h != nil {
		who = h.w.id
	}
	rctx, cancel := context.WithTimeout(ctx, nativeTimeout)
	err := g.Reserve(rctx, Reservation{ID: id, Command: "token budget: " + reason})
	hash := ""
	if err == nil {
		hash, err = g.Hold(rctx, id, reason)
	}
	cancel()
	e.mu.Lock()
	if err != nil {
		e.replyLocked(fmt.Sprintf("%s is at its token budget, and the native root could not hold it: %v", who, err))
		e.mu.Unlock()
		return false
	}
	e.replyLocked(fmt.Sprintf("%s is held in the native root at its token budget (%s): hold %s on %s. Release it to go on: fleet root release --hold-hash %s …",
		who, reason, hash, id, hash))
	if h != nil {
		h.w.status = workerIdle
		e.setTaskLocked(h.t, taskBlocked, "held at its token budget: "+id)
	}
	e.mu.Unlock()
	if h != nil {
		defer e.resumeHeld(ctx, h)
	}
	workerID := ""
	if h != nil {
		workerID = h.w.id
	}
	// An error asking the root is logged and asked again at its next
	// change: a budget hold has no CLI waiting to be told.
	started, _ := e.awaitRoot(ctx, id, workerID, e.admitStop, func(err error) error {
		e.log.Error("ask the native root about a budget hold", "id", id, "err", err)
		return nil
	})
	return started
}

// settleBudgetAsksLocked resolves, as approved, the legacy budget confirms
// that /budget made moot by raising or removing the budget.
func (e *Engine) settleBudgetAsksLocked() {
	for _, r := range e.broker.pendingLocked() {
		if r.kind != kindConfirm {
			continue
		}
		moot := false
		if d := e.budget.decision; d != nil && r.agent == coordinatorAgent && r.taskID == "" && r.summary == d.summary {
			moot = !e.sessionExhaustedLocked()
		} else if w := e.workerByID[r.agent]; w != nil {
			if wb := e.budget.workers[w.id]; wb != nil && wb.asking != "" && r.summary == wb.asking {
				moot = !e.workerExhaustedLocked(w)
			}
		}
		if moot {
			e.broker.resolveLocked(r.id, answer{ok: true, approve: true}, protocol.ReasonSuperseded)
		}
	}
}

// costLocked is what tokens t of model cost in USD, by the price the
// operator configured for that model; ok is false when there is none.
func (e *Engine) costLocked(model string, t tokens) (usd float64, ok bool) {
	p, ok := e.cfg.Prices[model]
	if !ok {
		return 0, false
	}
	usd = (float64(t.input)*p.InputPerMTok + float64(t.output)*p.OutputPerMTok +
		float64(t.cacheRead)*p.CacheReadPerMTok + float64(t.cacheWrite)*p.CacheWritePerMTok) / 1e6
	return usd, true
}

const budgetUsage = "Usage: /budget shows use against the budgets; /budget session N|off, /budget worker N|off (every worker's default), /budget WORKER N|off (one worker), e.g. /budget session 2000000"

// cmdBudget shows or sets the token budgets.
func (e *Engine) cmdBudget(args string) (string, error) {
	f := strings.Fields(args)
	if len(f) == 0 {
		return e.budgetReportLocked(), nil
	}
	if len(f) != 2 {
		return "", failure(budgetUsage)
	}
	n, err := parseBudget(f[1])
	if err != nil {
		return "", failf("%v\n%s", err, budgetUsage)
	}
	var msg string
	switch strings.ToLower(f[0]) {
	case "session":
		e.budget.session, e.budget.sessionStep = n, n
		msg = "The session's token budget is " + budgetText(n, e.sessionTokens.total())
	case "worker", "workers":
		e.budget.workerDefault = n
		msg = "The workers' default token budget is " + budgetText(n, -1)
		var own []string
		for _, w := range e.workers {
			if wb := e.budget.workers[w.id]; wb != nil && wb.own {
				own = append(own, w.id)
			}
		}
		switch len(own) {
		case 0:
		case 1:
			msg += fmt.Sprintf(" (%s keeps its own)", own[0])
		default:
			msg += fmt.Sprintf(" (%s keep their own)", strings.Join(own, ", "))
		}
	default:
		w := e.workerByID[f[0]]
		if w == nil {
			return "", failf("No worker %q. /workers lists them.\n%s", f[0], budgetUsage)
		}
		wb := e.workerBudgetLocked(w)
		wb.limit, wb.own = n, true
		msg = fmt.Sprintf("%s's token budget is %s", w.id, budgetText(n, w.tokens.total()))
	}
	e.changedLocked()
	// A lower budget may be exhausted already; a higher one may end a wait.
	for _, w := range e.workers {
		if w.host != nil {
			e.checkWorkerLocked(w)
		}
	}
	e.checkSessionLocked()
	if e.cfg.Governor == nil {
		e.settleBudgetAsksLocked()
	} else if e.budget.decision != nil || e.anyBudgetHoldLocked() {
		msg += ". Budget holds in the native root stay until they are released (fleet root release)"
	}
	e.dispatchLocked()
	return msg + ".", nil
}

func (e *Engine) anyBudgetHoldLocked() bool {
	for _, w := range e.workers {
		if w.host != nil && w.status == workerIdle && e.budgetExhaustedLocked(w) {
			return true
		}
	}
	return false
}

// budgetText is a budget for a reply: "off", or N with what is used of it
// (used < 0: not shown).
func budgetText(n, used int64) string {
	if n <= 0 {
		return "off"
	}
	if used < 0 {
		return commas(n) + " tokens"
	}
	return fmt.Sprintf("%s tokens (%s used)", commas(n), commas(used))
}

// budgetReportLocked is /budget without arguments: the session's and each
// live worker's use against its budget, with the cost where prices are set.
func (e *Engine) budgetReportLocked() string {
	var b strings.Builder
	b.WriteString("Token budgets (tokens = input + output):")
	// The session: every account, its cost when every model with tokens has a price.
	var usd float64
	priced, unpriced := false, map[string]bool{}
	add := func(model string, t tokens) {
		if t.total()+t.cacheRead+t.cacheWrite == 0 {
			return
		}
		if c, ok := e.costLocked(model, t); ok {
			usd, priced = usd+c, true
		} else {
			unpriced[model] = true
		}
	}
	add(e.coordModelLocked(), e.coordTokens)
	for _, w := range e.workers {
		add(w.model, w.tokens)
	}
	fmt.Fprintf(&b, "\n  session  %s", usage(e.sessionTokens.total(), e.budget.session))
	if priced {
		fmt.Fprintf(&b, "  %s", dollars(usd))
		if len(unpriced) > 0 {
			b.WriteString(" (priced models only)")
		}
	}
	if d := e.budget.decision; d != nil {
		b.WriteString("  — waiting for a decision")
	}
	fmt.Fprintf(&b, "\n  workers' default budget: %s", budgetText(e.budget.workerDefault, -1))
	live := 0
	for _, w := range e.workers {
		if w.host == nil {
			continue
		}
		live++
		fmt.Fprintf(&b, "\n  %-5s %-8s %s", w.id, w.status, usage(w.tokens.total(), e.workerLimitLocked(w)))
		if w.model != "" {
			fmt.Fprintf(&b, "  %s", w.model)
		}
		if c, ok := e.costLocked(w.model, w.tokens); ok {
			fmt.Fprintf(&b, "  %s", dollars(c))
		}
		if e.budgetExhaustedLocked(w) && w.status == workerIdle {
			b.WriteString("  — paused at its budget")
		}
	}
	if live == 0 {
		b.WriteString("\n  no live workers")
	}
	return b.String()
}

func (e *Engine) coordModelLocked() string {
	if e.coordModel != "" {
		return e.coordModel
	}
	return e.cfg.Model
}

// usage is "used of budget (pct%)", or "used (no budget)".
func usage(used, budget int64) string {
	if budget <= 0 {
		return commas(used) + " tokens (no budget)"
	}
	return fmt.Sprintf("%s of %s tokens (%d%%)", commas(used), commas(budget), used*100/budget)
}

func dollars(usd float64) string {
	if usd < 0.01 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// parseBudget reads a budget: a positive number of tokens (with optional
// "," or "_" separators), or "off" (also 0).
func parseBudget(s string) (int64, error) {
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.NewReplacer(",", "", "_", "").Replace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number of tokens or off", s)
	}
	return n, nil
}

// raiseTo is limit raised by step until it is above used.
func raiseTo(limit, step, used int64) int64 {
	if step <= 0 {
		step = max(limit, 1)
	}
	if used < limit {
		return limit + step
	}
	return limit + ((used-limit)/step+1)*step
}

// commas writes n with thousands separators: 10240 → "10,240".
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
