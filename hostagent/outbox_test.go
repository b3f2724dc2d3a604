package hostagent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// cuttable joins h1 through a proxy whose link the test cuts; the lease
// is longer than any cut.
func cuttable(t *testing.T) (*hoststest.Hub, *Agent, *hoststest.Proxy) {
	t.Helper()
	hub := hoststest.StartHub(t, time.Minute)
	j := hub.Enrol(t, "h1")
	p := hoststest.StartProxy(t, j.Hub)
	j.Hub = p.Addr()
	a, _ := startAgentWith(t, Config{Join: j})
	waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	return hub, a, p
}

// cut cuts p's link and waits until the host sees it down.
func cut(t *testing.T, a *Agent, p *hoststest.Proxy) {
	t.Helper()
	p.Cut()
	testwait.For(t, testwait.Bound, "the link to go down", func() bool { return a.srv.NumLeafNodes() == 0 })
}

// TestEventsSurviveALinkCut: a worker printing through a cut of its link
// goes on, and its turn ends during the cut; when the link heals, every
// line arrives, once and in order, and the turn's work before its end.
func TestEventsSurviveALinkCut(t *testing.T) {
	hub, a, p := cuttable(t)
	f := newFleet(t, hub, "h1")
	stop := filepath.Join(testDir(t), "stop")
	r := f.claim(t, "w1", nil)
	r.waitEvent(t, wire.KindReady)
	r.send(t, fmt.Sprintf(`i=0; while [ ! -e '%s' ]; do i=$((i+1)); echo "line $i"; sleep 0.005; done; echo "last $i"; echo $i > count.txt`, stop))
	r.waitEvent(t, wire.KindOutput)
	run := a.lookup(r.key)
	cut(t, a, p)
	testwait.For(t, testwait.Bound, "output to wait on the host", func() bool { return run.out.queued() >= 20 })
	put(t, stop, "")
	// The turn's work is committed on the host; sending it waits for the link.
	wt := filepath.Join(a.cfg.WorkDir, "runs", r.key)
	testwait.For(t, testwait.Bound, "the turn's commit on the host", func() bool {
		return gitOut(wt, "log", "-1", "--format=%s") == "fleet: w1 turn 1"
	})
	if r.pull(t); slices.ContainsFunc(r.all(), func(e wire.Event) bool { return e.Kind == wire.KindTurnEnded }) {
		t.Fatal("the turn's end arrived during the cut")
	}
	p.Heal()
	end, turn := r.waitEvent(t, wire.KindTurnEnded)
	if end.Err != "" || turn[len(turn)-1].Kind != wire.KindBranch {
		t.Fatalf("turn ended %+v after %v", end, kinds(turn))
	}
	lines := outputLines(r.all())
	n := len(lines) - 1
	if n < 20 || lines[n] != fmt.Sprintf("last %d", n) {
		t.Fatalf("%d lines, the last %q", len(lines), lines[len(lines)-1])
	}
	for i, l := range lines[:n] {
		if l != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("line %d is %q", i+1, l)
		}
	}
	tip := r.fetch(t, turn[len(turn)-1])
	if got := gitT(t, f.repo, "show", tip+":count.txt"); got != fmt.Sprint(n) {
		t.Fatalf("count.txt %q, want %d", got, n)
	}
	// The run lives on, idle: its outbox keeps nothing the stream took
	// (the queue's array would hold every line sent since it grew).
	testwait.For(t, testwait.Bound, "the outbox to be empty", func() bool { return run.out.queued() == 0 })
	run.out.mu.Lock()
	held := cap(run.out.queue)
	run.out.mu.Unlock()
	if held != 0 {
		t.Fatalf("the empty outbox still holds an array of %d events", held)
	}
}

// TestOutboxWaitsWhenFull: an outbox past its bound holds the next event
// back until the stream has taken what it holds; nothing is lost or sent
// twice across the cut.
func TestOutboxWaitsWhenFull(t *testing.T) {
	hub, a, p := cuttable(t)
	f := newFleet(t, hub, "h1")
	const key = "s9-w9"
	fr := f.watch(t, key, 0)
	o := newOutbox(a.js, wire.EventSubject("h1", key), key+".test", a.log)
	o.max = 4 << 10
	t.Cleanup(o.abort)
	a.outWG.Go(o.send)
	cut(t, a, p)
	const events = 10
	pushed := make(chan int, events)
	go func() {
		defer close(pushed)
		for i := range events {
			o.push(wire.Event{Kind: wire.KindNote, Text: fmt.Sprintf("event %d %s", i+1, strings.Repeat("x", 1<<10))})
			pushed <- i + 1
		}
	}()
	testwait.For(t, testwait.Bound, "a push to wait for room", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.blocked == 1
	})
	if n := len(pushed); n >= events || n < 3 {
		t.Fatalf("%d of %d events pushed into a full outbox of %d bytes", n, events, o.max)
	}
	p.Heal()
	testwait.For(t, testwait.Bound, "every event to be pushed", func() bool { return len(pushed) == events })
	o.close()
	select {
	case <-o.done:
	case <-time.After(testwait.Bound):
		t.Fatal("the outbox did not finish sending")
	}
	testwait.For(t, testwait.Bound, "every event in the stream", func() bool { fr.pull(t); return len(fr.all()) == events })
	var got []string
	for _, e := range fr.all() {
		got = append(got, strings.Fields(e.Text)[1])
	}
	if want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}; !slices.Equal(got, want) {
		t.Fatalf("events %v", got)
	}
}
