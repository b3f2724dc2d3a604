// Package tui is the headless view model of `fleet console`: frames, keys
// and sizes go in, actions and the screen text come out. It does no I/O,
// starts no goroutines and reads the time only through Options.Now, so the
// Bubble Tea shell around it (app.go) stays thin and tests drive it
// directly.
//
// Model (this file) is the entry point: Apply folds a fleet's frames
// (fold.go) into what the console keeps of it (fleet.go); Key returns the
// actions a key press asks for (keys.go); View draws the screen
// (screen.go). Each numbered view is a tab in a file of its own (tab.go).
//
// Everything a fleet sends is untrusted: it is cleaned (console.Sanitize)
// before it is stored or drawn, so it can never put an escape sequence on
// the operator's terminal.
package tui

import (
	"slices"
	"time"

	"github.com/agents-fleet/fleet/client"
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

func (Send) isAction()        {}
func (SwitchFleet) isAction() {}
func (Quit) isAction()        {}
func (RunFleet) isAction()    {}

// Model is the whole console: the fleets, the UI state and the view. It is
// used through the pointer New returns: the fields a tab opens refer back
// to it.
type Model struct {
	opts Options
	now  func() time.Time
	st   styles

	width, height int
	focused       bool

	refs   []FleetRef
	fleets map[string]*fleet
	sel    string

	alerts  []string
	alerted idSet

	view view // the current tab
	tabs tabs // every tab's own state

	help      bool // the key help is open over the view
	helpTop   int
	picker    bool // the fleet picker is open over the view
	pickerSel int

	focus  input      // which text line has the keyboard
	prompt prompt     // the prompt line and its history
	field  field      // with inputField: the tab's field
	line   lineEditor // the text of the field

	confirm    *confirmation // a "…? y/n" question awaiting its answer
	flash      string        // a one-key message, gone at the next key
	candidates []string      // completions of the prompt, listed
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
		st:      newStyles(!opts.NoColor),
		width:   80,
		height:  24,
		focused: true,
		fleets:  map[string]*fleet{},
		alerted: newIDSet(maxAlerted),
		view:    viewWorkers,
	}
	m.resetFleetUI()
	return m
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
// The requests pending so far stay listed through the replay, which
// re-sends every unresolved one; the others leave at replayEnd
// (client.State.Attached). A hydrate in the replay replaces the history
// buffers; a new session id (the fleet restarted) drops everything of the
// old session.
func (m *Model) Connected(id string, w *protocol.Welcome) {
	f := m.fleetFor(id)
	if w == nil {
		w = &protocol.Welcome{}
	}
	if f.fold.Welcome != nil && f.fold.Welcome.SessionID != w.SessionID {
		f.resetSession()
	}
	f.fold.Attached(w)
	clear(f.answering)
	f.conn = connUp
	f.connErr = ""
	f.answered.clear()
	f.native.calls.Lost() // a new connection answers nothing sent before
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
	f.native.calls.Lost() // a mutation in flight becomes uncertain
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

// Note adds a line of the console's own to fleet id's conversation (the
// output of a command it ran), labelled "console".
func (m *Model) Note(id, text string) {
	if f := m.fleets[id]; f != nil {
		f.addConv(convEntry{who: "console", role: protocol.RoleSystem, text: text})
	}
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
	acts := m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: f.native.rootID})
	m.flash = flash // not the operator's doing: keep what the line said
	return acts
}

// notify alerts the operator to a request that joined fleet f's queue,
// once, unless they are watching that queue.
func (m *Model) notify(f *fleet, r client.Request) {
	key := f.ref.ID + "\x00" + r.ID()
	if m.alerted.has(key) {
		return
	}
	if m.focused && m.sel == f.ref.ID && m.view == viewRequests && !m.help && !m.picker {
		return
	}
	m.alerted.add(key)
	m.alert(f, r)
}

func (m *Model) alert(f *fleet, r client.Request) {
	if m.opts.Notify&NotifyOff != 0 {
		return
	}
	text := clipRunes("fleet "+f.name()+": needs input: "+oneLine(r.Text()), maxAlertRunes)
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
