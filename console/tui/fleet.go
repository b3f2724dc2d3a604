package tui

import (
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// What the console keeps of each fleet: the latest snapshots, bounded
// histories (conversation, transcripts, feed) and the request queue, all
// cleaned for display. fold.go fills it from frames; the tabs read it.

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

// tline is one cleaned transcript line.
type tline struct {
	role   protocol.Role
	stream protocol.Stream
	kind   string
	text   string
}

// workerLog is one worker's transcript.
type workerLog struct {
	lines ring[tline]
	used  int64 // logTick of the last write, for LRU eviction
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

// feedEntry is one cleaned line of the feed.
type feedEntry struct {
	kind  feedKind
	isErr bool
	ts    int64
	icon  string
	who   string
	what  string
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

// pendingList is f's request queue; a nil f has none.
func (f *fleet) pendingList() []*request {
	if f == nil {
		return nil
	}
	return f.pending
}

// dismissal is a request resolved without the operator: answered
// elsewhere, expired or cancelled.
type dismissal struct{ id, text, reason string }
