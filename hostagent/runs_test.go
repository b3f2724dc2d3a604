package hostagent

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

// localOnly is a host that runs the local shell.
func localOnly() map[string]provider.Provider {
	return map[string]provider.Provider{"local": &local.Provider{}}
}

// joined starts a hub, enrols h1 and joins it with cfg (Join, WorkDir and
// Providers filled in when unset), and waits until it is up.
func joined(t *testing.T, cfg Config) (*hoststest.Hub, *Agent, *hoststest.Log) {
	t.Helper()
	hub := hoststest.StartHub(t, testLease)
	if cfg.Join.Name == "" {
		cfg.Join = hub.Enrol(t, "h1")
	}
	a, log := startAgentWith(t, cfg)
	waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	return hub, a, log
}

// startAgentWith starts an agent with cfg; it stops when the test ends.
func startAgentWith(t *testing.T, cfg Config) (*Agent, *hoststest.Log) {
	t.Helper()
	log, logger := hoststest.NewLog(t, slog.LevelDebug)
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(testDir(t), "work")
	}
	if cfg.Providers == nil {
		cfg.Providers = localOnly()
	}
	cfg.Env, cfg.Version, cfg.Logger = os.Environ(), "test-build", logger
	a, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a, log
}

// TestWorkerRunsOnHost: a claim for the local provider runs on the host:
// "ready", each turn's output in order, its work committed and sent back
// as a branch the fleet fetches before it hears the turn ended, a second
// turn on the same session, a busy session and an interrupt, prompts
// answered from the fleet, and close: "ended", the worktree kept.
func TestWorkerRunsOnHost(t *testing.T) {
	hub, a, _ := joined(t, Config{})
	// The fleet makes the streams after the host joined: the host finds
	// them.
	f := newFleet(t, hub, "h1")
	if have := f.have(t); have.Err != "" || len(have.Commits) != 0 {
		t.Fatalf("have of an empty cache: %+v", have)
	}
	r := f.claim(t, "w1", nil)
	if ready, before := r.waitEvent(t, wire.KindReady); len(before) != 0 || ready.ID != "" {
		t.Fatalf("ready %+v after %+v", ready, before)
	}
	testwait.For(t, testwait.Bound, "the hub to hear h1 runs a worker", func() bool {
		h, _ := hub.Host("h1")
		return h.Running == 1
	})

	r.send(t, `printf 'one\ntwo\n'; echo hello > hello.txt; echo "worker $AGENTS_FLEET_WORKER"`)
	end, turn := r.waitEvent(t, wire.KindTurnEnded)
	if end.ExitCode != 0 || end.Err != "" || end.Interrupted {
		t.Fatalf("turn ended: %+v", end)
	}
	if got := outputLines(turn); !slices.Equal(got, []string{"one", "two", "worker w1"}) {
		t.Fatalf("output %q", got)
	}
	if k := kinds(turn); k[0] != wire.KindToolStart || k[len(k)-1] != wire.KindBranch || k[len(k)-2] != wire.KindToolEnd {
		t.Fatalf("turn's events %v: want the tool call, then the branch", k)
	}
	tip := r.fetch(t, turn[len(turn)-1])
	if got := gitT(t, f.repo, "show", tip+":hello.txt"); got != "hello" {
		t.Fatalf("hello.txt %q", got)
	}
	if got := gitT(t, f.repo, "log", "-1", "--format=%an <%ae> %cn <%ce>|%s", tip); got != "agents-fleet host h1 <fleet@localhost> agents-fleet host h1 <fleet@localhost>|fleet: w1 turn 1" {
		t.Fatalf("commit %q", got)
	}
	if rep := r.control(t, wire.Control{Op: wire.OpFetched, Commit: tip}); !rep.OK {
		t.Fatalf("fetched: %+v", rep)
	}
	if have := f.have(t); !slices.Contains(have.Commits, tip) || !slices.Contains(have.Commits, f.base) {
		t.Fatalf("have %+v: want the base and the branch's tip %s", have, tip)
	}

	// A second turn on the same session, failing, sends what it did.
	r.send(t, `cat hello.txt; echo more > more.txt; exit 3`)
	end, turn = r.waitEvent(t, wire.KindTurnEnded)
	if end.ExitCode != 3 || end.Err == "" {
		t.Fatalf("second turn ended: %+v", end)
	}
	if got := outputLines(turn); !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("second turn's output %q", got)
	}
	second := r.fetch(t, turn[len(turn)-1])
	if got := gitT(t, f.repo, "rev-list", "--format=%s", "--no-commit-header", f.base+".."+second); got != "fleet: w1 turn 2\nfleet: w1 turn 1" {
		t.Fatalf("branch history %q", got)
	}
	r.control(t, wire.Control{Op: wire.OpFetched, Commit: second})

	// A turn while one runs is refused as busy; an interrupt ends it.
	r.send(t, `echo sleeping; sleep 60`)
	r.waitEvent(t, wire.KindOutput)
	if rep := r.control(t, wire.Control{Op: wire.OpSend, Text: "echo no"}); !rep.Busy || rep.OK {
		t.Fatalf("send during a turn: %+v", rep)
	}
	if rep := r.control(t, wire.Control{Op: wire.OpInterrupt}); !rep.OK {
		t.Fatalf("interrupt: %+v", rep)
	}
	end, turn = r.waitEvent(t, wire.KindTurnEnded)
	if !end.Interrupted || slices.Contains(kinds(turn), wire.KindBranch) {
		t.Fatalf("interrupted turn: %+v after %v (nothing changed, so no branch)", end, kinds(turn))
	}

	// Prompts: a confirm and a question, answered from the fleet.
	r.send(t, `echo '::confirm::Deploy?'; read yes; echo "confirm $yes"; `+
		`echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "env $env"`)
	confirm, _ := r.waitEvent(t, wire.KindConfirm)
	if confirm.Text != "Deploy?" || confirm.ID == "" {
		t.Fatalf("confirm %+v", confirm)
	}
	if rep := r.control(t, wire.Control{Op: wire.OpAnswer, ID: confirm.ID, Answer: &wire.Answer{Yes: true}}); !rep.OK {
		t.Fatalf("answer: %+v", rep)
	}
	if rep := r.control(t, wire.Control{Op: wire.OpAnswer, ID: confirm.ID, Answer: &wire.Answer{Yes: false}}); rep.OK || rep.Err == "" {
		t.Fatalf("a second answer: %+v", rep)
	}
	ask, between := r.waitEvent(t, wire.KindAsk)
	if ask.Question == nil || ask.Question.Text != "Which env?" || len(ask.Question.Choices) != 2 || ask.ID == confirm.ID {
		t.Fatalf("ask %+v", ask)
	}
	r.control(t, wire.Control{Op: wire.OpAnswer, ID: ask.ID, Answer: &wire.Answer{Text: "prod"}})
	end, turn = r.waitEvent(t, wire.KindTurnEnded)
	if got := outputLines(append(between, turn...)); end.ExitCode != 0 || !slices.Equal(got, []string{"confirm yes", "env prod"}) {
		t.Fatalf("prompted turn: %+v, output %q", end, got)
	}

	if rep := r.control(t, wire.Control{Op: wire.OpClose}); !rep.OK {
		t.Fatalf("close: %+v", rep)
	}
	ended, rest := r.waitEvent(t, wire.KindEnded)
	if ended.Err != "" || ended.Late || len(rest) != 0 {
		t.Fatalf("ended %+v after %v", ended, kinds(rest))
	}
	testwait.For(t, testwait.Bound, "the run to be forgotten", func() bool { return a.lookup(r.key) == nil })
	if rep := r.control(t, wire.Control{Op: wire.OpSend, Text: "echo late"}); !rep.Gone {
		t.Fatalf("send after close: %+v", rep)
	}
	if a.running.Load() != 0 {
		t.Fatalf("running %d after close", a.running.Load())
	}
	if _, err := os.Stat(filepath.Join(a.cfg.WorkDir, "runs", r.key, "more.txt")); err != nil {
		t.Fatalf("the worktree is not kept: %v", err)
	}
}

// TestBadInputIsRefused: a claim that does not decode is dropped and the
// next one runs; control and have requests that make no sense get an
// error, a run the host does not have is gone, and a claim for a provider
// the host lacks ends at once, saying so.
func TestBadInputIsRefused(t *testing.T) {
	hub, _, log := joined(t, Config{})
	f := newFleet(t, hub, "h1")
	f.publishClaim(t, []byte("not a claim"), "garbage")
	testwait.For(t, testwait.Bound, "the bad claim to be dropped", func() bool { return log.Contains("a claim that does not decode") })
	r := f.claim(t, "w1", nil)
	r.waitEvent(t, wire.KindReady)

	var rep wire.Reply
	f.requestRaw(t, wire.ControlSubject("h1", r.key), []byte("{"), &rep)
	if rep.Err == "" || rep.OK {
		t.Fatalf("an undecodable control request: %+v", rep)
	}
	for _, c := range []struct {
		c    wire.Control
		want string
	}{
		{wire.Control{Op: "dance"}, `unknown op "dance"`},
		{wire.Control{Op: wire.OpAnswer, ID: "x"}, "an id and an answer are required"},
		{wire.Control{Op: wire.OpAnswer, ID: "x", Answer: &wire.Answer{Yes: true}}, `no request "x" is waiting`},
		{wire.Control{Op: wire.OpFetched, Commit: "HEAD"}, "is not a commit id"},
	} {
		if rep := r.control(t, c.c); rep.OK || !strings.Contains(rep.Err, c.want) {
			t.Fatalf("%+v: %+v, want an error with %q", c.c, rep, c.want)
		}
	}
	if rep := (&fleetRun{f: f, key: "s1-nobody"}).control(t, wire.Control{Op: wire.OpSend, Text: "echo"}); !rep.Gone {
		t.Fatalf("a run the host does not have: %+v", rep)
	}
	var have wire.HaveReply
	f.request(t, wire.HaveSubject("h1"), wire.Have{Repo: "../etc"}, &have)
	if have.Err == "" || len(have.Commits) != 0 {
		t.Fatalf("have of a bad repository id: %+v", have)
	}

	bad := f.claim(t, "w2", func(s *wire.Start) { s.Provider = "claude" })
	ended, before := bad.waitEvent(t, wire.KindEnded)
	if !strings.Contains(ended.Err, `this host has no provider "claude"`) || len(before) != 0 {
		t.Fatalf("a claim for a missing provider: %+v after %v", ended, kinds(before))
	}
}

// TestSlotsAndDraining: a host takes no more claims than its slots, and
// none while drained; what it does not take waits in the queue.
func TestSlotsAndDraining(t *testing.T) {
	hub, a, log := joined(t, Config{Slots: 1})
	f := newFleet(t, hub, "h1")
	w1 := f.claim(t, "w1", nil)
	w1.waitEvent(t, wire.KindReady)
	w2 := f.claim(t, "w2", nil)
	passes := a.claimPasses.Load()
	testwait.For(t, testwait.Bound, "the claim loop to look a few times", func() bool { return a.claimPasses.Load() >= passes+3 })
	if w2.pull(t); len(w2.all()) != 0 {
		t.Fatalf("a second worker on one slot: %v", kinds(w2.all()))
	}
	w1.control(t, wire.Control{Op: wire.OpClose})
	w2.waitEvent(t, wire.KindReady)

	if _, err := hosts.Drain(hub.Dir, "h1"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "the host to be told it is drained", func() bool { return log.Contains("the fleet drains this host") })
	w2.control(t, wire.Control{Op: wire.OpClose})
	w2.waitEvent(t, wire.KindEnded)
	w3 := f.claim(t, "w3", nil)
	passes = a.claimPasses.Load()
	testwait.For(t, testwait.Bound, "the claim loop to look a few times", func() bool { return a.claimPasses.Load() >= passes+3 })
	if w3.pull(t); len(w3.all()) != 0 {
		t.Fatalf("a drained host took a claim: %v", kinds(w3.all()))
	}
	info, err := f.js.Stream(t.Context(), wire.WorkStream)
	if err != nil {
		t.Fatal(err)
	}
	if info.CachedInfo().State.Msgs != 1 {
		t.Fatalf("WORK holds %d claims, want w3's", info.CachedInfo().State.Msgs)
	}
}

// TestCloseEndsWorkers: a host that stops ends its workers first: the
// running turn is interrupted, its work committed and sent, "ended" says
// the host stopped, and all of it is in the stream before the link goes.
func TestCloseEndsWorkers(t *testing.T) {
	hub, a, _ := joined(t, Config{})
	f := newFleet(t, hub, "h1")
	r := f.claim(t, "w1", nil)
	r.waitEvent(t, wire.KindReady)
	r.send(t, `echo x > x.txt; echo started; sleep 60`)
	r.waitEvent(t, wire.KindOutput)
	start := time.Now()
	a.Close()
	if d := time.Since(start); d > closeRunsBound {
		t.Fatalf("Close took %v", d)
	}
	end, turn := r.waitEvent(t, wire.KindTurnEnded)
	if !end.Interrupted || len(turn) == 0 || turn[len(turn)-1].Kind != wire.KindBranch {
		t.Fatalf("the interrupted turn: %+v after %v", end, kinds(turn))
	}
	tip := r.fetch(t, turn[len(turn)-1])
	if got := gitT(t, f.repo, "show", tip+":x.txt"); got != "x" {
		t.Fatalf("x.txt %q", got)
	}
	ended, rest := r.waitEvent(t, wire.KindEnded)
	if ended.Err != "host h1 stopped" || len(rest) != 0 {
		t.Fatalf("ended %+v after %v", ended, kinds(rest))
	}
}

// TestStopMarksLate: a run the fleet gave up (stop) ends like a closed one,
// and what it says from then on is marked late.
func TestStopMarksLate(t *testing.T) {
	hub, _, _ := joined(t, Config{})
	f := newFleet(t, hub, "h1")
	r := f.claim(t, "w1", nil)
	r.waitEvent(t, wire.KindReady)
	r.send(t, `echo before; echo y > y.txt; sleep 60`)
	out, _ := r.waitEvent(t, wire.KindOutput)
	if out.Late {
		t.Fatalf("output before the stop is late: %+v", out)
	}
	if rep := r.control(t, wire.Control{Op: wire.OpStop}); !rep.OK {
		t.Fatalf("stop: %+v", rep)
	}
	ended, rest := r.waitEvent(t, wire.KindEnded)
	if !ended.Late || !strings.HasPrefix(ended.Err, "stopped") {
		t.Fatalf("ended %+v", ended)
	}
	if k := kinds(rest); !slices.Contains(k, wire.KindBranch) || !slices.Contains(k, wire.KindTurnEnded) {
		t.Fatalf("events after the stop: %v", k)
	}
	for _, e := range rest {
		if !e.Late {
			t.Fatalf("%+v after the stop is not late", e)
		}
	}
}

// TestClaimedAgain: a worker claimed again after it ended (a new task)
// reuses its worktree, and its events, numbered from 1 again, all arrive;
// a claim of a worker the host still runs ends the old run first, marked
// late, then starts.
func TestClaimedAgain(t *testing.T) {
	hub, _, _ := joined(t, Config{})
	f := newFleet(t, hub, "h1")
	first := f.claim(t, "w1", nil)
	first.waitEvent(t, wire.KindReady)
	first.send(t, `echo one > one.txt`)
	_, turn := first.waitEvent(t, wire.KindTurnEnded)
	tip := first.fetch(t, turn[len(turn)-1])
	first.control(t, wire.Control{Op: wire.OpFetched, Commit: tip})
	first.control(t, wire.Control{Op: wire.OpClose})
	first.waitEvent(t, wire.KindEnded)

	// As the fleet does, the claim's base is what it has of the worker:
	// the tip it fetched (the host's cache has it).
	second := f.claim(t, "w1", func(s *wire.Start) { s.Base, s.BaseKey, s.Acked = tip, "", tip })
	second.waitEvent(t, wire.KindReady)
	second.send(t, `cat one.txt; echo two > two.txt`)
	_, turn = second.waitEvent(t, wire.KindTurnEnded)
	if got := outputLines(turn); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("the second claim's worktree: output %q", got)
	}
	tip = second.fetch(t, turn[len(turn)-1])
	if got := gitT(t, f.repo, "show", tip+":two.txt"); got != "two" {
		t.Fatalf("two.txt %q", got)
	}

	// A third claim while the second runs: the second ends, late; its
	// last batch is before the third's first in the stream.
	second.send(t, `echo waiting; sleep 60`)
	second.waitEvent(t, wire.KindOutput)
	s := wire.Start{Claim: "s1-w1.third", Session: "s1", Worker: "w1", Provider: "local", Repo: f.repoID(t), Base: tip, Branch: "fleet/s1/w1", Acked: tip}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	f.publishClaim(t, data, "third")
	ended, _ := second.waitEvent(t, wire.KindEnded)
	if !ended.Late || !strings.Contains(ended.Err, "claimed this worker again") {
		t.Fatalf("the second run ended %+v", ended)
	}
	third := f.watch(t, "s1-w1", second.last+1)
	third.branch = s.Branch
	third.waitEvent(t, wire.KindReady)
	third.send(t, `ls`)
	_, turn = third.waitEvent(t, wire.KindTurnEnded)
	if got := outputLines(turn); !slices.Equal(got, []string{"README", "one.txt", "two.txt"}) {
		t.Fatalf("the third claim's worktree: %q", got)
	}
}
