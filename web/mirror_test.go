package web

import (
	"fmt"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// A page that stops reading is dropped once its queue is full, and the
// others keep theirs; a page dropped so reconnects to a fresh replay.
func TestMirrorDropsAPageThatFallsBehind(t *testing.T) {
	m := newMirror()
	m.reset([]byte(`{"type":"welcome"}`))
	slow := m.subscribe(connState{State: "attached"})
	fast := m.subscribe(connState{State: "attached"})
	read := 0
	for i := 0; ; i++ {
		msg := &protocol.Transcript{Role: protocol.RoleTool, Text: fmt.Sprint(i), Agent: "w1"}
		m.add(msg, []byte(fmt.Sprintf(`{"type":"transcript","text":"%d"}`, i)))
		for len(fast.ch) > 0 { // fast keeps up
			<-fast.ch
			read++
		}
		select {
		case <-slow.gone:
			if i < subQueue {
				t.Fatalf("the slow page was dropped after %d frames; its queue holds %d beyond its replay", i, subQueue)
			}
			select {
			case <-fast.gone:
				t.Fatal("the page that kept up was dropped too")
			default:
			}
			// Its EventSource comes back to a fresh replay.
			again := m.subscribe(connState{State: "attached"})
			if e := <-again.ch; e.kind != "reset" {
				t.Fatalf("a new stream starts with %q", e.kind)
			}
			return
		default:
		}
		if i > subQueue+maxHistory+1000 {
			t.Fatal("the slow page was never dropped")
		}
	}
}

// The history is bounded and says how much it dropped; a new page is told.
func TestMirrorHistoryBounded(t *testing.T) {
	m := newMirror()
	m.reset([]byte(`{"type":"welcome"}`))
	for i := range maxHistory + 10 {
		m.add(&protocol.Reply{Text: fmt.Sprint(i)}, []byte(fmt.Sprintf(`{"type":"reply","text":"%d"}`, i)))
	}
	s := m.subscribe(connState{State: "attached"})
	frames, missed := 0, ""
	for len(s.ch) > 0 {
		e := <-s.ch
		switch e.kind {
		case "frame":
			frames++
		case "missed":
			missed = string(e.data)
		}
	}
	if frames != maxHistory+1 || missed != `{"missed":10}` { // the welcome, then the history
		t.Fatalf("replayed %d frames, missed %s; want %d and 10", frames, missed, maxHistory+1)
	}
}
