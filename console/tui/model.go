// Package tui is the headless view model of `fleet console`: frames, keys
// and sizes go in, actions and the screen text come out. It does no I/O,
// starts no goroutines and reads the time only through Options.Now, so the
// Bubble Tea shell around it stays thin and tests drive it directly.
//
// Everything a fleet sends is untrusted: it is cleaned (console.Sanitize)
// before it is stored or drawn, so it can never put an escape sequence on
// the operator's terminal.
package tui

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// Bounds on everything the model keeps: a flood of frames costs CPU, never
// unbounded memory.
const (
	maxConversation = 500              // conversation entries kept
	maxConvBytes    = 4 << 20          // text kept across the conversation
	maxEntryLines   = 2000             // lines kept of one entry (a long /diff reply)
	maxTranscript   = 2000             // transcript lines per worker
	maxWorkerLogs   = 64               // workers with a transcript, least recently written evicted
	maxFeed         = 1000             // feed entries
	maxLineBytes    = 512              // one stored transcript or feed line
	maxConvLineText = 2048             // one stored conversation line
	maxFilesPerMsg  = 20               // feed entries made from one fileChange frame
	maxPending      = 100              // pending requests shown; more are counted
	maxDismissed    = 5                // "dismissed: …" notices kept
	maxOwnPrompts   = 256              // request ids of our prompts awaiting their echo
	maxAnswered     = 256              // request ids we answered, awaiting confirmResolved
	maxAlerted      = 256              // request ids already alerted for
	maxHistory      = 100              // prompt history
	maxNativeCalls  = 32               // native requests in flight
	maxNativeRoots  = 32               // roots kept from a list result
	maxAlertRunes   = 120              // desktop notification text
	staleAfter      = 30 * time.Second // silence before "no frames for Ns"
)

// NotifyMode selects how a waiting request is signalled (bit flags).
type NotifyMode uint8

// Notification kinds. The zero value means NotifyBell|NotifyOSC9; NotifyOff
// overrides the others.
const (
	NotifyBell NotifyMode = 1 << iota
	NotifyOSC9
	NotifyOSC777
	NotifyOff
)

// Options configures a Model.
type Options struct {
	Now     func() time.Time // default time.Now
	NoColor bool             // render without colours or styles (NO_COLOR)
	Notify  NotifyMode       // default NotifyBell|NotifyOSC9
}

// FleetRef is one fleet the app knows of (from the registry).
type FleetRef struct{ ID, Name, Cwd string }

// Action is something the app must do after a key press.
type Action interface{ isAction() }

// Send asks the app to send a frame to a fleet.
type Send struct {
	Fleet string
	Msg   protocol.Message
}

// SwitchFleet asks the app to attach to another fleet.
type SwitchFleet struct{ ID string }

// Quit asks the app to exit.
type Quit struct{}

// RunFleet asks the app to run this binary with Args in Dir (fleet apply,
// which changes the operator's work tree, so it is not a prompt to the
// fleet) and to report its output with Note.
type RunFleet struct {
	Fleet string
	Dir   string
	Args  []string
}

func (RunFleet) isAction() {}

// Note adds a line of the console's own to fleet id's conversation (the
// output of a command it ran), labelled "console".
func (m *Model) Note(id, text string) {
	if f := m.fleets[id]; f != nil {
		f.addConv(convEntry{who: "console", role: protocol.RoleSystem, text: text})
	}
}

func (Send) isAction()        {}
func (SwitchFleet) isAction() {}
func (Quit) isAction()        {}

// view is one of the numbered tabs.
type view int

const (
	viewWorkers view = iota + 1
	viewTasks
	viewFeed
	viewTimeline
	viewRequests
	viewConversation
	viewNative
	viewIntel
	numViews = int(viewIntel)
)

// Model is the whole console: the fleets, the UI state and the view.
type Model struct {
	opts    Options
	now     func() time.Time
	randHex func(n int) string // swapped by tests for stable ids
	st      styles

	width, height int
	focused       bool

	refs   []FleetRef
	fleets map[string]*fleet
	sel    string

	alerts  []string
	alerted idSet

	ui
}

// New returns a Model with no fleets, sized 80×24 until Resize.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Notify == 0 {
		opts.Notify = NotifyBell | NotifyOSC9
	}
	m := &Model{
		opts:    opts,
		now:     opts.Now,
		randHex: cryptoHex,
		st:      newStyles(!opts.NoColor),
		width:   80,
		height:  24,
		focused: true,
		fleets:  map[string]*fleet{},
		alerted: newIDSet(maxAlerted),
	}
	m.ui.init()
	return m
}

func cryptoHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Resize sets the screen size in cells.
func (m *Model) Resize(width, height int) {
	m.width, m.height = max(width, 0), max(height, 0)
}

// Focused records whether the terminal has focus.
func (m *Model) Focused(yes bool) { m.focused = yes }

// Alerts returns the control sequences to write to the terminal since the
// last call: bell and desktop notifications for requests that need input.
func (m *Model) Alerts() []string {
	a := m.alerts
	m.alerts = nil
	return a
}

// SetFleets replaces the list of known fleets, keeping the state of those
// still listed (by ID) and dropping the others. The selected fleet stays
// selected even when it is no longer listed: it stopped, and the app
// either follows it to its successor or shows it as stopped; jumping to
// another fleet would show one the app is not attached to.
func (m *Model) SetFleets(refs []FleetRef) {
	m.refs = append([]FleetRef(nil), refs...)
	for _, r := range refs {
		f := m.fleets[r.ID]
		if f == nil {
			f = newFleet(r.ID)
			m.fleets[r.ID] = f
		}
		f.ref = r
	}
	if m.sel == "" && len(refs) > 0 {
		m.sel = refs[0].ID
		m.resetFleetUI()
	}
	m.prune()
	m.pickerSel = min(m.pickerSel, max(len(m.refs)-1, 0))
}

// prune drops the fleets that are neither listed nor selected.
func (m *Model) prune() {
	for id := range m.fleets {
		if id != m.sel && !slices.ContainsFunc(m.refs, func(r FleetRef) bool { return r.ID == id }) {
			delete(m.fleets, id)
		}
	}
}

// Select makes id the current fleet.
func (m *Model) Select(id string) {
	if id == m.sel {
		return
	}
	m.fleetFor(id)
	m.sel = id
	m.resetFleetUI()
	m.prune()
}

// Selected returns the current fleet's ID.
func (m *Model) Selected() string { return m.sel }

// Connected records that the app attached to fleet id; its replay follows.
// Pending requests are dropped (the replay re-sends every unresolved one);
// a hydrate in the replay replaces the history buffers; a new session id
// (the fleet restarted) drops everything of the old session.
func (m *Model) Connected(id string, w *protocol.Welcome) {
	f := m.fleetFor(id)
	if w == nil {
		w = &protocol.Welcome{}
	}
	if f.welcome != nil && f.welcome.SessionID != w.SessionID {
		f.resetSession()
	}
	f.welcome = w
	f.conn = connUp
	f.connErr = ""
	f.pending = nil
	f.overflow = 0
	f.answered.clear()
	f.native.dropReads()
	f.lastFrame = m.now()
}

// Disconnected records that the connection to fleet id was lost and when
// the app retries.
func (m *Model) Disconnected(id string, err error, retryIn time.Duration) {
	f := m.fleetFor(id)
	f.conn = connDown
	f.connErr = ""
	if err != nil {
		f.connErr = oneLine(err.Error())
	}
	f.retryIn = retryIn
	f.downAt = m.now()
	f.native.markUncertain()
}

// Skipped notes in fleet id's feed that n malformed entries of a frame of
// type typ were left out (client.Conn.Skipped): the rest was shown.
func (m *Model) Skipped(id, typ string, n int) {
	what := plural(n, "malformed "+typ+" entry") + " skipped"
	if typ == protocol.TypeHydrate {
		what = plural(n, "history entry") + " skipped (malformed)"
	}
	m.fleetFor(id).feed.push(feedEntry{kind: feedErrors, isErr: true, ts: m.now().UnixMilli(), icon: "!", who: "console", what: what})
}

// Apply folds one frame of fleet id into the model. replay marks history
// (between welcome and replayEnd): folded the same way, without alerts or
// dismissal notices.
func (m *Model) Apply(id string, msg protocol.Message, replay bool) {
	f := m.fleets[id]
	if f == nil && id != m.sel {
		return // a fleet left behind (followed to its successor, or dropped from the registry)
	}
	f = m.fleetFor(id)
	now := m.now()
	f.lastFrame = now
	msg = asPointer(msg)
	m.foldDiff(id, msg, replay)
	switch v := msg.(type) {
	case *protocol.Welcome:
		f.welcome = v
	case *protocol.UserMessage:
		mine := v.RequestID != "" && f.own.remove(v.RequestID)
		who := oneLine(v.Source)
		if mine {
			who = "you"
		} else if who == "" {
			who = "user"
		}
		f.addConv(convEntry{who: who, mine: mine, role: protocol.RoleUser, text: v.Text})
	case *protocol.Reply:
		f.addConv(convEntry{who: "fleet", role: protocol.RoleAssistant, text: v.Text})
	case *protocol.Status:
		f.status = v
	case *protocol.FleetState:
		f.state, f.stateAt = v, now
	case *protocol.FleetAnalytics:
		f.analytics = v
	case *protocol.CommandCatalog:
		f.catalog = v
	case *protocol.FleetIntel:
		f.intel = v
	case *protocol.FleetEvolution:
		f.evolution = v
	case *protocol.FleetStore:
		f.store = v
	case *protocol.FleetExperiment:
		f.experiment = v
	case *protocol.Hydrate:
		f.hydrate(v)
	case *protocol.Transcript:
		f.addTranscript(v.Agent, tline{role: v.Role, stream: v.Stream, kind: v.Kind}, v.Text)
	case *protocol.ToolCall:
		f.feed.push(toolEntry(v))
	case *protocol.FileChange:
		for i, c := range v.Changes {
			if i == maxFilesPerMsg {
				f.feed.push(feedEntry{kind: feedFiles, ts: v.Ts, icon: "✎", what: plural(len(v.Changes)-i, "more file change")})
				break
			}
			ts := c.Ts
			if ts == 0 {
				ts = v.Ts
			}
			f.feed.push(feedEntry{kind: feedFiles, ts: ts, icon: "✎", who: clip(oneLine(c.Agent)),
				what: clip(oneLine(string(c.ChangeType)) + " " + oneLine(c.Path))})
		}
	case *protocol.HubEvent:
		f.feed.push(hubEntry(v))
	case *protocol.Error:
		// error frames carry no time: stamp them on arrival.
		f.feed.push(feedEntry{kind: feedErrors, isErr: true, ts: now.UnixMilli(), icon: "!", who: "error", what: clip(oneLine(v.Message))})
	case *protocol.ConfirmRequest:
		m.addRequest(f, &request{id: v.ID, confirm: v, ts: v.Ts, text: v.Summary}, replay)
	case *protocol.AskRequest:
		m.addRequest(f, &request{id: v.ID, ask: v, ts: v.Ts, text: v.Question}, replay)
	case *protocol.ConfirmResolved:
		m.resolve(f, v, replay)
	case *protocol.NativeRootResult:
		f.native.result(v)
	}
	// pong, replayEnd and unknown types change nothing but the frame time.
}

// asPointer turns a message passed by value into its pointer form, the form
// protocol.Decode returns.
func asPointer(msg protocol.Message) protocol.Message {
	switch v := msg.(type) {
	case protocol.Welcome:
		return &v
	case protocol.UserMessage:
		return &v
	case protocol.Reply:
		return &v
	case protocol.Status:
		return &v
	case protocol.FleetState:
		return &v
	case protocol.FleetAnalytics:
		return &v
	case protocol.CommandCatalog:
		return &v
	case protocol.FleetIntel:
		return &v
	case protocol.FleetEvolution:
		return &v
	case protocol.FleetStore:
		return &v
	case protocol.FleetExperiment:
		return &v
	case protocol.Hydrate:
		return &v
	case protocol.Transcript:
		return &v
	case protocol.ToolCall:
		return &v
	case protocol.FileChange:
		return &v
	case protocol.HubEvent:
		return &v
	case protocol.Error:
		return &v
	case protocol.ConfirmRequest:
		return &v
	case protocol.AskRequest:
		return &v
	case protocol.ConfirmResolved:
		return &v
	case protocol.NativeRootResult:
		return &v
	}
	return msg
}

func (m *Model) fleetFor(id string) *fleet {
	f := m.fleets[id]
	if f == nil {
		f = newFleet(id)
		f.ref = FleetRef{ID: id}
		m.fleets[id] = f
	}
	return f
}

// cur is the selected fleet, or nil.
func (m *Model) cur() *fleet { return m.fleets[m.sel] }

// Pending returns what the model wants sent without a key press: a fresh
// native status after a mutation was accepted (so the view shows the new
// revision and intent, not the one the operator acted on). The app calls
// it after folding frames.
func (m *Model) Pending() []Action {
	f := m.cur()
	if f == nil || !f.native.stale || f.native.rootID == "" || f.conn != connUp {
		return nil
	}
	f.native.stale = false
	flash := m.flash
	acts := m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: f.native.rootID}, false)
	m.flash = flash // not the operator's doing: keep what the line said
	return acts
}

func (m *Model) addRequest(f *fleet, r *request, replay bool) {
	r.lines = textLines(r.text)
	for i, q := range f.pending {
		if q.id == r.id { // a re-sent request replaces the old copy in place
			r.answering = q.answering
			f.pending[i] = r
			return
		}
	}
	if len(f.pending) >= maxPending {
		f.overflow++
		return
	}
	f.pending = append(f.pending, r)
	if replay {
		return
	}
	key := f.ref.ID + "\x00" + r.id
	if m.alerted.has(key) {
		return
	}
	if m.focused && m.sel == f.ref.ID && m.view == viewRequests && !m.help && !m.picker {
		return
	}
	m.alerted.add(key)
	m.alert(f, r)
}

func (m *Model) alert(f *fleet, r *request) {
	if m.opts.Notify&NotifyOff != 0 {
		return
	}
	text := clipRunes("fleet "+f.name()+": needs input: "+oneLine(r.text), maxAlertRunes)
	if m.opts.Notify&NotifyBell != 0 {
		m.alerts = append(m.alerts, "\a")
	}
	if m.opts.Notify&NotifyOSC9 != 0 {
		m.alerts = append(m.alerts, "\x1b]9;"+text+"\x07")
	}
	if m.opts.Notify&NotifyOSC777 != 0 {
		m.alerts = append(m.alerts, "\x1b]777;notify;fleet console;"+text+"\x07")
	}
}

func (m *Model) resolve(f *fleet, v *protocol.ConfirmResolved, replay bool) {
	mine := f.answered.remove(v.ID)
	for i, r := range f.pending {
		if r.id != v.ID {
			continue
		}
		f.pending = append(f.pending[:i], f.pending[i+1:]...)
		if !mine && !replay && r.answering == "" {
			f.dismissed.push(dismissal{id: oneLine(r.id), text: oneLine(r.text), reason: dismissReason(v.Reason)})
		}
		return
	}
}

func dismissReason(r protocol.ResolvedReason) string {
	switch r {
	case "", protocol.ReasonAnswered, protocol.ReasonSuperseded:
		return "answered elsewhere"
	case protocol.ReasonExpired:
		return "expired"
	case protocol.ReasonCancelled:
		return "cancelled"
	}
	return oneLine(string(r))
}

// connState is the app's connection to a fleet.
type connState int

const (
	connNever connState = iota // not attached yet
	connUp
	connDown
)

// fleet is everything known about one fleet.
type fleet struct {
	ref     FleetRef
	welcome *protocol.Welcome
	conn    connState
	connErr string
	retryIn time.Duration
	downAt  time.Time

	lastFrame time.Time

	status     *protocol.Status
	state      *protocol.FleetState
	stateAt    time.Time
	analytics  *protocol.FleetAnalytics
	catalog    *protocol.CommandCatalog
	intel      *protocol.FleetIntel
	evolution  *protocol.FleetEvolution
	store      *protocol.FleetStore
	experiment *protocol.FleetExperiment

	conv      ring[convEntry]
	convBytes int
	logs      map[string]*workerLog
	logTick   int64
	feed      ring[feedEntry]

	pending   []*request
	overflow  int // requests beyond maxPending, not shown
	dismissed ring[dismissal]
	answered  idSet
	own       idSet

	native nativeState
}

func newFleet(id string) *fleet {
	return &fleet{
		ref:       FleetRef{ID: id},
		conv:      newRing[convEntry](maxConversation),
		logs:      map[string]*workerLog{},
		feed:      newRing[feedEntry](maxFeed),
		dismissed: newRing[dismissal](maxDismissed),
		answered:  newIDSet(maxAnswered),
		own:       newIDSet(maxOwnPrompts),
		native:    newNativeState(),
	}
}

// resetSession drops what belonged to a previous session of the fleet.
func (f *fleet) resetSession() {
	keep := *f
	*f = *newFleet(f.ref.ID)
	f.ref = keep.ref
	f.own = keep.own
	f.dismissed = keep.dismissed
	// An uncertain mutation stays retryable: the durable operationId is
	// what makes the retry safe across restarts.
	f.native.lastMut = keep.native.lastMut
}

// name is how the operator knows the fleet.
func (f *fleet) name() string {
	if f.welcome != nil && f.welcome.SessionName != "" {
		return oneLine(f.welcome.SessionName)
	}
	if f.state != nil && f.state.Session != nil && f.state.Session.SessionName != "" {
		return oneLine(f.state.Session.SessionName)
	}
	if f.ref.Name != "" {
		return oneLine(f.ref.Name)
	}
	return oneLine(f.ref.ID)
}

// convEntry is one conversation turn; text is raw, split when drawn.
type convEntry struct {
	who   string // cleaned label: "you", a client name, "fleet"
	mine  bool
	role  protocol.Role
	text  string
	lines []string // cleaned lines
}

func (f *fleet) addConv(e convEntry) {
	e.lines = textLines(e.text)
	if len(e.lines) > maxEntryLines {
		more := len(e.lines) - maxEntryLines
		e.lines = append(e.lines[:maxEntryLines:maxEntryLines], "… "+plural(more, "more line"))
	}
	for i, l := range e.lines {
		e.lines[i] = clipBytes(l, maxConvLineText)
	}
	e.text = ""
	n := entrySize(e)
	for f.conv.len() > 0 && f.convBytes+n > maxConvBytes {
		f.convBytes -= entrySize(f.conv.shift())
	}
	if old, ok := f.conv.push(e); ok {
		f.convBytes -= entrySize(old)
	}
	f.convBytes += n
}

func entrySize(e convEntry) int {
	n := len(e.who) + 16
	for _, l := range e.lines {
		n += len(l) + 16
	}
	return n
}

// tline is one cleaned transcript line.
type tline struct {
	role   protocol.Role
	stream protocol.Stream
	kind   string
	text   string
}

type workerLog struct {
	lines ring[tline]
	used  int64 // logTick of the last write, for LRU eviction
}

func (f *fleet) addTranscript(agent string, proto tline, text string) {
	if agent == "" {
		agent = "coordinator"
	}
	lg := f.logs[agent]
	if lg == nil {
		if len(f.logs) >= maxWorkerLogs {
			f.evictLog()
		}
		lg = &workerLog{lines: newRing[tline](maxTranscript)}
		f.logs[agent] = lg
	}
	f.logTick++
	lg.used = f.logTick
	for _, l := range textLines(text) {
		t := proto
		t.text = clipBytes(l, maxLineBytes)
		lg.lines.push(t)
	}
}

func (f *fleet) evictLog() {
	oldest, key := int64(-1), ""
	for k, lg := range f.logs {
		if oldest < 0 || lg.used < oldest {
			oldest, key = lg.used, k
		}
	}
	delete(f.logs, key)
}

// log returns the transcript of a worker known by name or id.
func (f *fleet) log(keys ...string) *workerLog {
	for _, k := range keys {
		if k == "" {
			continue
		}
		if lg := f.logs[k]; lg != nil {
			return lg
		}
	}
	return nil
}

// hydrate replaces the history buffers with the attach-time backfill, so a
// re-attach shows history once.
func (f *fleet) hydrate(h *protocol.Hydrate) {
	f.conv.reset()
	f.convBytes = 0
	for _, c := range h.Conversation {
		who := string(c.Role)
		if c.Role == protocol.RoleAssistant {
			who = "fleet"
		}
		f.addConv(convEntry{who: oneLine(who), role: c.Role, text: c.Text})
	}
	f.logs = map[string]*workerLog{}
	for _, t := range h.Transcripts {
		f.addTranscript(t.Agent, tline{role: t.Role}, t.Text)
	}
	f.feed.filter(func(e feedEntry) bool { return e.kind != feedHub })
	for i := range h.Hub {
		f.feed.push(hubEntry(&h.Hub[i]))
	}
}

// feedKind is the kind filter of the Feed view.
type feedKind int

const (
	feedAll feedKind = iota
	feedTools
	feedFiles
	feedHub
	feedErrors
	numFeedKinds
)

var feedKindNames = [...]string{"all", "tools", "files", "hub", "errors"}

// feedEntry is one cleaned line of the feed.
type feedEntry struct {
	kind  feedKind
	isErr bool
	ts    int64
	icon  string
	who   string
	what  string
}

func toolEntry(v *protocol.ToolCall) feedEntry {
	who := oneLine(v.AgentName)
	if who == "" {
		who = oneLine(v.Agent)
	}
	e := feedEntry{kind: feedTools, ts: v.Ts, who: clip(who)}
	tool := oneLine(v.Tool)
	if v.Phase == protocol.PhaseStart {
		e.icon = "▶"
		e.what = tool
		if d := firstLine(v.Detail); d != "" {
			e.what += ": " + d
		}
	} else {
		e.isErr = v.IsError != nil && *v.IsError
		e.icon = "✓"
		e.what = tool
		if e.isErr {
			e.icon = "✗"
			if r := lastLine(v.Result); r != "" {
				e.what += ": " + r
			} else {
				e.what += " failed"
			}
		}
		if d := v.DurationMs; d != nil && e.isErr {
			e.what += " (" + fmtDur(time.Duration(*d)*time.Millisecond) + ")"
		} else if d != nil {
			e.what += " " + fmtDur(time.Duration(*d)*time.Millisecond)
		}
	}
	e.what = clip(e.what)
	return e
}

func hubEntry(v *protocol.HubEvent) feedEntry {
	what := oneLine(v.Kind)
	if v.To != "" {
		what += " → " + oneLine(v.To)
	}
	if t := firstLine(v.Text); t != "" {
		what += ": " + t
	}
	return feedEntry{kind: feedHub, ts: v.Ts, icon: "•", who: clip(oneLine(v.From)), what: clip(what),
		isErr: v.Kind == protocol.HubFailed}
}

// request is a pending confirm or ask.
type request struct {
	id        string
	confirm   *protocol.ConfirmRequest
	ask       *protocol.AskRequest
	ts        int64
	text      string   // the summary or question, raw
	lines     []string // cleaned lines of text
	answering string   // what we sent, "" until answered
}

// choices returns the ask's choices, nil for a confirm.
func (r *request) choices() []protocol.AskChoiceOption {
	if r.ask == nil {
		return nil
	}
	return r.ask.Choices
}

// freeform says whether a typed answer is accepted.
func (r *request) freeform() bool {
	if r.ask == nil {
		return false
	}
	return len(r.ask.Choices) == 0 || (r.ask.AllowFreeform != nil && *r.ask.AllowFreeform)
}

type dismissal struct{ id, text, reason string }

// nativeCall is a nativeRoot request awaiting its result.
type nativeCall struct {
	tid       string
	req       protocol.NativeRequest
	mutation  bool
	uncertain bool // sent, no result, and the connection dropped since
}

// nativeState is the Native view's data.
type nativeState struct {
	roots   []protocol.NativeRootInfo
	rootSel int
	rootID  string
	status  *protocol.NativeRootStatus
	last    string // plain text of the last receipt or error
	lastErr bool
	calls   map[string]*nativeCall
	order   []string    // transport ids in sending order, for the bound
	lastMut *nativeCall // the latest mutation until its result arrives
	// stale: a mutation was accepted, so the status shown is old; Pending
	// asks for a fresh one.
	stale bool
}

func newNativeState() nativeState {
	return nativeState{calls: map[string]*nativeCall{}}
}

func (n *nativeState) track(c *nativeCall) {
	if len(n.order) >= maxNativeCalls {
		delete(n.calls, n.order[0])
		n.order = n.order[1:]
	}
	n.calls[c.tid] = c
	n.order = append(n.order, c.tid)
	if c.mutation {
		n.lastMut = c
	}
}

func (n *nativeState) forget(tid string) {
	delete(n.calls, tid)
	for i, t := range n.order {
		if t == tid {
			n.order = append(n.order[:i], n.order[i+1:]...)
			break
		}
	}
}

// dropReads forgets reads in flight: they died with the connection.
func (n *nativeState) dropReads() {
	for _, tid := range append([]string(nil), n.order...) {
		if !n.calls[tid].mutation {
			n.forget(tid)
		}
	}
}

func (n *nativeState) markUncertain() {
	for _, c := range n.calls {
		if c.mutation {
			c.uncertain = true
		}
	}
}

func (n *nativeState) result(v *protocol.NativeRootResult) {
	var call *nativeCall
	if v.ID != nil {
		call = n.calls[*v.ID]
		if call != nil {
			n.forget(call.tid)
		}
	}
	if call != nil && call == n.lastMut {
		n.lastMut = nil // answered: no longer uncertain
	}
	r := v.Result
	switch r.Kind {
	case protocol.NativeKindRoots:
		n.roots = append([]protocol.NativeRootInfo(nil), r.Roots[:min(len(r.Roots), maxNativeRoots)]...)
		n.rootSel = currentRoot(n.roots)
		if len(n.roots) > 0 {
			n.rootID = n.roots[n.rootSel].ID
		}
		n.last, n.lastErr = plural(len(r.Roots), "root")+" listed", false
	case protocol.NativeKindStatus:
		if r.Root != nil {
			n.status = r.Root
			n.rootID = r.Root.ID
		}
	case protocol.NativeKindReceipt:
		n.last, n.lastErr = receiptText(r.Receipt), false
		n.stale = true
	case protocol.NativeKindPolicyAdmission:
		s := "policy admission: new root " + oneLine(r.RootID)
		if r.PreviousRootID != "" {
			s += ", previous root " + oneLine(r.PreviousRootID)
			if r.PreviousRootUnchanged != nil && *r.PreviousRootUnchanged {
				s += " unchanged"
			}
		}
		if r.SessionRebound != nil {
			s += ", session rebound: " + yesNo(*r.SessionRebound)
		}
		if r.Receipt != nil {
			s += ", receipt " + oneLine(r.Receipt.Status)
		}
		if r.RootID != "" {
			n.rootID = r.RootID
		}
		n.last, n.lastErr = s, false
	case protocol.NativeKindError:
		n.last, n.lastErr = nativeErrorText(call, r.Code, r.Message), true
	}
}

// currentRoot picks the root a list most likely means: one no other root
// replaced, else the first.
func currentRoot(roots []protocol.NativeRootInfo) int {
	replaced := map[string]bool{}
	for _, r := range roots {
		if r.PreviousRootID != "" {
			replaced[r.PreviousRootID] = true
		}
	}
	for i, r := range roots {
		if !replaced[r.ID] {
			return i
		}
	}
	return 0
}

func receiptText(rc *protocol.NativeReceipt) string {
	if rc == nil {
		return "receipt (empty)"
	}
	s := "receipt: " + oneLine(rc.Action) + " root " + oneLine(rc.RootID) +
		" → revision " + itoa(rc.Revision) + ", " + oneLine(rc.Status)
	if rc.Status == "persisted" {
		s += " (recorded, not yet carried out: follow the root status)"
	}
	return s
}

func nativeErrorText(call *nativeCall, code, msg string) string {
	code, msg = oneLine(code), oneLine(msg)
	var s string
	switch code {
	case "revision_conflict":
		s = "conflict: the root changed since you looked"
		if call != nil && call.req.ExpectedRevision != nil {
			s += " (you saw revision " + itoa(*call.req.ExpectedRevision) + ")"
		}
		s += "; press r to refresh, then try again"
	case "operation_id_reused":
		s = "refused: that operation id was already used for a different request"
	case "native_mode_required":
		s = "not a native session: native controls need a fleet started with --native-root"
	case "unknown_root":
		s = "unknown root: press r to list the roots again"
	default:
		s = "error " + code
	}
	if msg != "" {
		s += " — " + msg
	}
	return s
}

// ring is a fixed-capacity FIFO that overwrites its oldest element.
type ring[T any] struct {
	buf   []T
	start int
	n     int
	cap   int
	total int64 // elements ever pushed: the sequence number of the next one
}

func newRing[T any](capacity int) ring[T] { return ring[T]{cap: capacity} }

// push appends v, returning the element it evicted, if any.
func (r *ring[T]) push(v T) (old T, evicted bool) {
	r.total++
	if r.n < r.cap {
		if len(r.buf) < r.cap {
			r.buf = append(r.buf, v)
		} else {
			r.buf[(r.start+r.n)%r.cap] = v
		}
		r.n++
		return old, false
	}
	old = r.buf[r.start]
	r.buf[r.start] = v
	r.start = (r.start + 1) % r.cap
	return old, true
}

// shift removes and returns the oldest element; the ring must not be empty.
func (r *ring[T]) shift() T {
	var zero T
	v := r.buf[r.start]
	r.buf[r.start] = zero
	r.start = (r.start + 1) % r.cap
	r.n--
	return v
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th element, 0 being the oldest.
func (r *ring[T]) at(i int) T { return r.buf[(r.start+i)%r.cap] }

// firstSeq is the sequence number of the oldest element.
func (r *ring[T]) firstSeq() int64 { return r.total - int64(r.n) }

func (r *ring[T]) reset() { r.buf, r.start, r.n = nil, 0, 0 }

// filter keeps the elements keep accepts, in order.
func (r *ring[T]) filter(keep func(T) bool) {
	var kept []T
	for i := 0; i < r.n; i++ {
		if v := r.at(i); keep(v) {
			kept = append(kept, v)
		}
	}
	total := r.total
	r.reset()
	for _, v := range kept {
		r.push(v)
	}
	r.total = total
}

// idSet is a bounded set of ids; the oldest id goes when it is full.
type idSet struct {
	m     map[string]struct{}
	order []string
	max   int
}

func newIDSet(n int) idSet { return idSet{m: map[string]struct{}{}, max: n} }

func (s *idSet) add(id string) {
	if _, ok := s.m[id]; ok {
		return
	}
	if len(s.order) >= s.max {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	s.m[id] = struct{}{}
	s.order = append(s.order, id)
}

func (s *idSet) has(id string) bool { _, ok := s.m[id]; return ok }

// remove deletes id and reports whether it was there.
func (s *idSet) remove(id string) bool {
	if _, ok := s.m[id]; !ok {
		return false
	}
	delete(s.m, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return true
}

func (s *idSet) clear() {
	clear(s.m)
	s.order = s.order[:0]
}

// Text helpers. Every string from a fleet goes through oneLine or
// textLines before it is stored for display or drawn.

// oneLine cleans s for a single display line: line breaks and tabs become
// spaces, other control characters U+FFFD.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n\t") {
		s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
	}
	return console.Sanitize(s)
}

// textLines cleans s and splits it into lines, dropping trailing blank ones;
// it returns at least one line.
func textLines(s string) []string {
	s = strings.TrimRight(s, "\r\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = console.Sanitize(strings.TrimSuffix(p, "\r"))
	}
	return parts
}

// firstLine is the first non-blank line of s, cleaned, "…" marking more.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, rest, more := strings.Cut(s, "\n")
	line = console.Sanitize(strings.TrimSpace(line))
	if more && strings.TrimSpace(rest) != "" {
		line += " …"
	}
	return line
}

// lastLine is the last non-blank line of s, cleaned: an error's cause is
// usually at the end of the output.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	i := strings.LastIndexByte(s, '\n')
	line := console.Sanitize(strings.TrimSpace(s[i+1:]))
	if i >= 0 {
		line = "… " + line
	}
	return line
}

// clip bounds a stored feed field.
func clip(s string) string { return clipBytes(s, maxLineBytes) }

// clipBytes cuts s to at most n bytes on a rune boundary, marking the cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// clipRunes cuts s to at most n runes, marking the cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
