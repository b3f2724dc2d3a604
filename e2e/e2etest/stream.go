package e2etest

import (
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// longBound bounds a wait for something the fleet does with real agent
// CLIs on a loaded machine; a wait reaches it only when what it waits for
// never comes.
const longBound = 3 * time.Minute

// Stream is a console's frames, read on a goroutine of their own so that a
// test can wait for them with a bound.
type Stream struct {
	T      *testing.T
	Frames chan Frame // closed when the connection ends
}

// Frame is one frame a console read.
type Frame struct {
	Msg    protocol.Message
	Replay bool // inside the replay that precedes replayEnd
}

// Watch reads c until it ends.
func Watch(t *testing.T, c *client.Conn) *Stream {
	s := &Stream{T: t, Frames: make(chan Frame, 100000)}
	go func() {
		defer close(s.Frames)
		for {
			m, _, replay, err := c.Next()
			if err != nil {
				if _, ok := err.(*client.FrameError); ok {
					continue
				}
				return
			}
			s.Frames <- Frame{m, replay}
		}
	}()
	return s
}

// WaitFor returns the first frame matching pred, failing after 15 s.
func (s *Stream) WaitFor(what string, pred func(protocol.Message) bool) protocol.Message {
	s.T.Helper()
	return s.WaitWithin(15*time.Second, what, pred)
}

// WaitLong is WaitFor with a bound fit for real CLIs on a loaded machine
// (3 minutes).
func (s *Stream) WaitLong(what string, pred func(protocol.Message) bool) protocol.Message {
	s.T.Helper()
	return s.WaitWithin(longBound, what, pred)
}

// WaitWithin reads frames until one matches pred and returns it, failing
// when the connection closes or bound passes first. The frames it read
// before are consumed.
func (s *Stream) WaitWithin(bound time.Duration, what string, pred func(protocol.Message) bool) protocol.Message {
	s.T.Helper()
	timeout := time.After(bound)
	for {
		select {
		case f, ok := <-s.Frames:
			if !ok {
				s.T.Fatalf("connection closed while waiting for %s", what)
			}
			if pred(f.Msg) {
				return f.Msg
			}
		case <-timeout:
			s.T.Fatalf("timed out after %v waiting for %s", bound, what)
		}
	}
}

// GitOf waits (WaitLong) for a fleetState in which worker's git state
// satisfies ok, and returns that state.
func GitOf(s *Stream, what, worker string, ok func(*protocol.WorkerGit) bool) *protocol.WorkerGit {
	s.T.Helper()
	var got *protocol.WorkerGit
	s.WaitLong(what, func(m protocol.Message) bool {
		fs, isFS := m.(*protocol.FleetState)
		if !isFS {
			return false
		}
		for _, w := range fs.Workers {
			if w.ID == worker && w.Git != nil && ok(w.Git) {
				got = w.Git
				return true
			}
		}
		return false
	})
	return got
}

// IsType matches the frames of type typ.
func IsType(typ string) func(protocol.Message) bool {
	return func(m protocol.Message) bool { return m.MessageType() == typ }
}

// HubIs matches the hub event of kind from from.
func HubIs(from, kind string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == from && h.Kind == kind
	}
}

// TranscriptIs matches agent's transcript line text.
func TranscriptIs(agent, text string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == agent && tr.Text == text
	}
}

// ReplyContaining matches a reply whose text holds sub.
func ReplyContaining(sub string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, sub)
	}
}
