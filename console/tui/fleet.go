package tui

import (
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// What the console keeps of each fleet: the latest snapshots and the
// request queue (client.State, the fold every console shares), and
// bounded histories (conversation, transcripts, feed) cleaned for display.
// fold.go fills it from frames; the tabs read it.

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
	conn    connState
	connErr string
	retryIn time.Duration
	downAt  time.Time

	lastFrame time.Time

	// fold holds the newest welcome, dashboards and snapshots, and the
	// requests the fleet is waiting on, oldest first.
	fold    client.State
	stateAt time.Time // when fold.Fleet came

	conv      ring[convEntry]
	convBytes int
	logs      map[string]*workerLog
	logTick   int64
	feed      ring[feedEntry]

	// answering is what we sent for a pending request, by id, until its
	// confirmResolved; it is never larger than the pending list.
	answering map[string]string
	dismissed ring[dismissal]
	answered  idSet
	own       idSet

	native nativeState
}

func newFleet(id string) *fleet {
	return &fleet{
		ref:       FleetRef{ID: id},
		fold:      client.State{MaxPending: maxPending},
		answering: map[string]string{},
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
	if w := f.fold.Welcome; w != nil && w.SessionName != "" {
		return oneLine(w.SessionName)
	}
	if s := f.fold.Fleet; s != nil && s.Session != nil && s.Session.SessionName != "" {
		return oneLine(s.Session.SessionName)
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

// pending is f's request queue, oldest first; a nil f has none. The
// slice is the fold's own: read it before the next frame, never keep it.
func (f *fleet) pending() []client.Request {
	if f == nil {
		return nil
	}
	return f.fold.Pending()
}

// dismissal is a request resolved without the operator: answered
// elsewhere, expired or cancelled.
type dismissal struct{ id, text, reason string }
