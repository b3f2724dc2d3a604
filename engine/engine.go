// Package engine owns a fleet session's state: the coordinator that turns
// prompts into tasks, the workers that run them through a provider, the
// confirm/ask broker, and the snapshots behind status, fleetState and
// fleetAnalytics. Everything it does is published as protocol messages to a
// Publisher; it never knows who listens.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// Publisher receives every event the engine produces. Publish must not block
// and must not call back into the engine (the control server's Broadcast
// only queues bytes).
type Publisher interface {
	Broadcast(m protocol.Message)
}

// BatchPublisher is a Publisher that also takes a run of events at once
// (the journal is one): task output goes to it a read at a time.
type BatchPublisher interface {
	Publisher
	BroadcastBatch(ms []protocol.Message)
}

// Config configures an Engine. Provider and Publisher are required.
type Config struct {
	SessionID   string
	SessionName string
	Cwd         string // where tasks run (worktrees come later)
	Model       string // reported model name; default the provider's name
	// Provider runs workers (and, for an agent provider, the coordinator).
	Provider provider.Provider
	// Providers are the other providers /spawn --provider may name, by
	// name; optional.
	Providers map[string]provider.Provider
	Publisher Publisher
	// Throttle, when set, is called before each group of task output (at
	// most 128 lines) is published; it may block to pass clients'
	// backpressure on to the task (controlsock.Server.Throttle). Lifecycle
	// events are never throttled.
	Throttle func(ctx context.Context)
	Logger   *slog.Logger

	// Workspaces isolates workers (git worktrees); nil runs every task in Cwd.
	Workspaces Workspaces
	// Policy says which commands need a confirm first; nil: none do.
	Policy *provider.Policy
	// Persister saves state in order with events; nil saves nothing.
	Persister Persister
	// Restore resumes a saved session; nil starts a fresh one.
	Restore *Restore
	// Governor is the native root of a native session; nil for legacy.
	Governor Governor

	// Hosts are the worker hosts workers may also run on (hosts.go); nil
	// runs every worker here, and Placement then has no effect.
	Hosts Hosts
	// Placement is where an unpinned worker starts when Hosts is set:
	// PlacementLocalFirst (the default), PlacementSpread or
	// PlacementHostsOnly. New panics on any other value.
	Placement string

	Workers        int           // local concurrency cap (workerMax); default 4
	RequestTTL     time.Duration // confirm/ask expiry; default 30 min
	MaxPending     int           // unresolved confirm/ask at once; default 256
	StatusInterval time.Duration // status/fleetState/fleetAnalytics tick; default 1 s
	Heartbeat      time.Duration // re-send unchanged snapshots this often; default 10 s
	Env            []string      // environment for tasks; default os.Environ()
	// Coordinator, when set, makes plain prompts turns of an agent
	// coordinator session of Provider (agent providers); nil keeps the
	// local provider's deterministic coordinator.
	Coordinator *CoordinatorConfig
	// Intel records runs and steering and answers /fleet-intel and
	// /learn; nil records nothing.
	Intel Intel
	// Repo is the repository's top level, for the intel store; "" outside git.
	Repo string
	// CommitOnSettle says whether a settling worker's uncommitted work is
	// committed on its branch (Lander); nil: for agent providers only.
	CommitOnSettle *bool
	// GitStateInterval is how often workers' git state is checked; default 2 s.
	GitStateInterval time.Duration
	// StallTimeout fails an agent turn that showed no activity for this
	// long while not waiting on the operator; 0 never does.
	StallTimeout time.Duration
	// Budgets are the token budgets (budget.go); zero values: none.
	Budgets Budgets
	// Prices are USD per million tokens by model name, for the cost /budget
	// shows; a model without one shows none.
	Prices map[string]Price
	// Memory measures this machine (memory.go); nil admits workers by
	// count alone and measures no worker.
	Memory Memory
	// Limits are the start values of the limits /limits changes.
	Limits Limits
}

// Engine is one fleet session. Create it with New, start its periodic
// snapshots with Run, feed it prompts, and stop it with Shutdown.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	pub     Publisher
	started time.Time

	// mu guards all session state below. Lifecycle events are published while
	// it is held so that every client sees them in the order they happened;
	// the hot transcript path publishes without it.
	mu         sync.Mutex
	tasks      []*task // creation order
	taskByID   map[string]*task
	workers    []*worker
	workerByID map[string]*worker
	nextTask   int
	nextWorker int
	paused     bool
	planMode   bool
	closing    bool
	loops      []*loop
	loopByID   map[string]*loop
	nextLoop   int
	version    uint64 // bumped on every change a snapshot shows
	tools      map[string]*toolStat
	broker     broker

	// The agent coordinator (agent providers only) and token accounts.
	coord         coordinator
	coordSession  string // the coordinator CLI's session id
	coordModel    string
	coordTokens   tokens
	sessionTokens tokens
	budget        budgetState         // token budgets (budget.go)
	limits        Limits              // the session's, changed by /limits
	mem           memState            // the last memory measure (memory.go)
	rateHolds     map[string]rateHold // providers held by a rate limit (ratelimit.go)

	runWG sync.WaitGroup // task goroutines, the native admitLoop

	admitWake chan struct{} // cap 1: the native root or the queue changed
	// nativeCh is closed and replaced at every change of the native root,
	// for tool requests waiting on a native approval.
	nativeMu  sync.Mutex
	nativeCh  chan struct{}
	admitStop chan struct{} // closed by Shutdown
}

// New returns an engine; it publishes the command catalog at once.
func New(cfg Config) *Engine {
	if cfg.Provider == nil || cfg.Publisher == nil {
		panic("engine: Config.Provider and Config.Publisher are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Placement == "" {
		cfg.Placement = PlacementLocalFirst
	}
	checkPlacement(cfg.Placement)
	if cfg.RequestTTL <= 0 {
		cfg.RequestTTL = 30 * time.Minute
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 256
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Model == "" {
		cfg.Model = cfg.Provider.Name()
	}
	if cfg.GitStateInterval <= 0 {
		cfg.GitStateInterval = defaultGitStateInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		pub:        cfg.Publisher,
		started:    time.Now(),
		taskByID:   make(map[string]*task),
		workerByID: make(map[string]*worker),
		tools:      make(map[string]*toolStat),
		loopByID:   make(map[string]*loop),
		admitWake:  make(chan struct{}, 1),
		nativeCh:   make(chan struct{}),
		admitStop:  make(chan struct{}),
		limits:     cfg.Limits,
	}
	e.broker.init(e)
	e.budget.init(cfg.Budgets)
	e.pub.Broadcast(commandCatalog())
	if cfg.Governor != nil {
		e.runWG.Add(1)
		go e.admitLoop()
	}
	if l := e.lander(); l != nil {
		e.runWG.Add(1)
		go e.gitStateLoop(l)
	}
	e.runWG.Add(1)
	go e.watchLoop()
	if cfg.Restore != nil {
		e.mu.Lock()
		e.restoreLocked(cfg.Restore)
		e.dispatchLocked()
		e.mu.Unlock()
	}
	return e
}

// Run publishes status, fleetState and fleetAnalytics every StatusInterval
// when something changed, and at least every Heartbeat, until ctx ends.
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.StatusInterval)
	defer t.Stop()
	var lastVersion uint64
	var lastSent time.Time
	first := true
	for {
		e.mu.Lock()
		v := e.version
		if first || v != lastVersion || time.Since(lastSent) >= e.cfg.Heartbeat {
			e.publishSnapshotsLocked()
			lastVersion, lastSent, first = v, time.Now(), false
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Prompt handles a prompt from source with no request id; see PromptMessage.
func (e *Engine) Prompt(source, text string) {
	e.PromptMessage(&protocol.UserMessage{Source: source, Text: text})
}

// PromptMessage publishes the userMessage echo and handles the prompt:
// shell lines become tasks, slash commands run, anything else gets a
// helpful reply. After Shutdown prompts are ignored.
func (e *Engine) PromptMessage(m *protocol.UserMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return
	}
	e.pub.Broadcast(m)
	e.handlePromptLocked(m.Source, m.Text)
}

// AnswerConfirm resolves a pending confirm request. reason is what the
// other surfaces are told: "answered" for a socket client, "superseded" for
// the fleet's own terminal.
func (e *Engine) AnswerConfirm(id string, approve bool, reason string) error {
	return e.broker.answer(id, answer{approve: approve, confirm: true}, protocol.ResolvedReason(reason))
}

// AnswerAsk resolves a pending ask request; reason as for AnswerConfirm.
func (e *Engine) AnswerAsk(id, text string, reason string) error {
	return e.broker.answer(id, answer{text: text}, protocol.ResolvedReason(reason))
}

// NativeModeRequired is the answer to every nativeRoot request in a legacy
// session.
func NativeModeRequired() protocol.NativeResult {
	return protocol.NativeResult{
		Kind:    protocol.NativeKindError,
		Code:    "native_mode_required",
		Message: "native controls need a session started with --native-root; this session is legacy",
	}
}

// Shutdown stops dispatch, cancels running tasks (their process groups are
// killed), resolves every pending request as cancelled, waits for the task
// goroutines, and publishes final snapshots. It is idempotent.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if !e.closing {
		e.closing = true
		for _, w := range e.workers {
			if w.cancel != nil {
				w.cancel(errShutdown)
			}
		}
		e.broker.cancelAllLocked()
		close(e.admitStop)
	}
	e.mu.Unlock()
	e.closeCoordinator()
	done := make(chan struct{})
	go func() { e.runWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("engine shutdown: tasks still running: %w", ctx.Err())
	}
	e.mu.Lock()
	e.publishSnapshotsLocked()
	e.mu.Unlock()
	return nil
}

// Announce publishes a note from the fleet to every console (a reply), for
// example that tasks run without isolation outside a git repository.
func (e *Engine) Announce(text string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.replyLocked(text)
}

// changedLocked marks state as changed for the next snapshot tick.
func (e *Engine) changedLocked() { e.version++ }

func (e *Engine) replyLocked(text string) {
	e.pub.Broadcast(&protocol.Reply{Text: text, Ts: nowMs()})
}

// replyErrorLocked replies that a prompt or command failed or was refused:
// the reply is marked isError, so that a script can tell.
func (e *Engine) replyErrorLocked(text string) {
	e.pub.Broadcast(&protocol.Reply{Text: text, Ts: nowMs(), IsError: protocol.Bool(true)})
}

// activityLocked posts an event to the inter-agent activity feed (a
// hubEvent frame on the wire).
func (e *Engine) activityLocked(from, kind, text string) {
	e.pub.Broadcast(&protocol.HubEvent{From: from, Kind: kind, Ts: nowMs(), Text: protocol.CutText(text, maxActivityText)})
}

func nowMs() int64 { return time.Now().UnixMilli() }

// publishBatch publishes ms in order, at once when the publisher can.
func (e *Engine) publishBatch(ms []protocol.Message) {
	if bp, ok := e.pub.(BatchPublisher); ok {
		bp.BroadcastBatch(ms)
		return
	}
	for _, m := range ms {
		e.pub.Broadcast(m)
	}
}
