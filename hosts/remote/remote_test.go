package remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/hostagent"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/hosts/remote"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
	"github.com/nats-io/nats.go/jetstream"
)

func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": os.DevNull, "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Fleet Test", "GIT_AUTHOR_EMAIL": "fleet@example.com",
		"GIT_COMMITTER_NAME": "Fleet Test", "GIT_COMMITTER_EMAIL": "fleet@example.com",
	} {
		os.Setenv(k, v)
	}
	goleak.VerifyTestMain(m,
		// nats.go v1.55.0's ObjectStore.Put leak; see docs/hosts.md.
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// recorder is the engine's side of a session: it keeps every event and
// answers every confirm with yes.
type recorder struct {
	mu     sync.Mutex
	events []provider.Event
	asked  []string
}

func (r *recorder) Event(ev provider.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) Permission(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: true}, nil
}

func (r *recorder) Ask(_ context.Context, q provider.Question) (string, error) {
	r.mu.Lock()
	r.asked = append(r.asked, q.Text)
	r.mu.Unlock()
	return "staging", nil
}

func (r *recorder) Confirm(_ context.Context, summary string) (bool, error) {
	r.mu.Lock()
	r.asked = append(r.asked, summary)
	r.mu.Unlock()
	return true, nil
}

func (r *recorder) all() []provider.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// turnEnd waits for the n-th TurnEnded.
func (r *recorder) turnEnd(t *testing.T, n int) provider.TurnEnded {
	t.Helper()
	var got []provider.TurnEnded
	testwait.For(t, testwait.Bound, fmt.Sprintf("turn %d to end", n), func() bool {
		got = got[:0]
		for _, ev := range r.all() {
			if te, ok := ev.(provider.TurnEnded); ok {
				got = append(got, te)
			}
		}
		return len(got) >= n
	})
	return got[n-1]
}

func (r *recorder) lines() []string {
	var out []string
	for _, ev := range r.all() {
		if o, ok := ev.(provider.Output); ok && o.Stream == provider.Stdout {
			out = append(out, o.Lines...)
		}
	}
	return out
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// setup is a hub with h1 joined (running the local shell), a user
// repository and worker w1's mirror work tree on fleet/s1/w1.
type setup struct {
	hub    *hoststest.Hub
	agent  *hostagent.Agent
	fleet  *remote.Fleet
	repo   string
	mirror string
}

func newSetup(t *testing.T, lease time.Duration, through func(hubAddr string) string) *setup {
	t.Helper()
	s := &setup{hub: hoststest.StartHub(t, lease)}
	j := s.hub.Enrol(t, "h1")
	if through != nil {
		j.Hub = through(j.Hub)
	}
	_, logger := hoststest.NewLog(t, slog.LevelDebug)
	var err error
	s.agent, err = hostagent.Start(t.Context(), hostagent.Config{Join: j, WorkDir: filepath.Join(t.TempDir(), "work"),
		Providers: map[string]provider.Provider{"local": &local.Provider{}}, Env: os.Environ(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.agent.Close)
	s.fleet = remote.New(remote.Config{Hub: s.hub.Hub, Lease: lease})
	t.Cleanup(s.fleet.Close)
	testwait.For(t, testwait.Bound, "h1 up", func() bool {
		c, _ := s.fleet.Candidates("local", "", "")
		return len(c) == 1
	})
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.repo, s.mirror = filepath.Join(dir, "repo"), filepath.Join(dir, "wt", "w1")
	git(t, dir, "init", "-q", "-b", "main", s.repo)
	os.WriteFile(filepath.Join(s.repo, "README"), []byte("hello\n"), 0o644)
	git(t, s.repo, "add", "-A")
	git(t, s.repo, "commit", "-q", "-m", "initial")
	git(t, s.repo, "worktree", "add", "-q", "-b", "fleet/s1/w1", s.mirror)
	return s
}

func (s *setup) start(t *testing.T, h provider.Host) provider.Session {
	t.Helper()
	sess, err := s.fleet.Provider("h1", "local").Start(t.Context(), provider.Spec{Agent: "w1", Role: provider.RoleWorker, Dir: s.mirror,
		Env: []string{provider.SessionEnv + "=s1", "AGENTS_FLEET_WORKER=w1", "SECRET_OF_THE_FLEET=x"}}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// A worker on a host runs each turn there; its output comes back in
// order, its work lands on its branch in the user's repository and in its
// mirror (which the engine's file tracking and landing read), a confirm
// is answered from here, and Close ends it.
func TestWorkerOnAHost(t *testing.T) {
	s := newSetup(t, hosts.DefaultLease, nil)
	if c, why := s.fleet.Candidates("claude", "", ""); len(c) != 0 || why != "waiting for a host that can run claude" {
		t.Fatalf("claude candidates %v, %q", c, why)
	}
	if c, why := s.fleet.Candidates("local", "", "gpu"); len(c) != 0 || why != "waiting for a host with label gpu that can run local" {
		t.Fatalf("gpu candidates %v, %q", c, why)
	}
	if c, why := s.fleet.Candidates("local", "h9", ""); len(c) != 0 || !strings.Contains(why, "h9, which is not enrolled") {
		t.Fatalf("h9 candidates %v, %q", c, why)
	}
	rec := &recorder{}
	sess := s.start(t, rec)
	if err := sess.Send(t.Context(), provider.Turn{Text: `for i in 1 2 3; do echo "line $i"; done; echo made > made.txt; env | grep -c SECRET_OF_THE_FLEET; echo "session=$AGENTS_FLEET_SESSION"`}); err != nil {
		t.Fatal(err)
	}
	if te := rec.turnEnd(t, 1); te.Err != nil || te.ExitCode != 0 {
		t.Fatalf("turn 1: %+v", te)
	}
	if got, want := rec.lines(), []string{"line 1", "line 2", "line 3", "0", "session=s1"}; !slices.Equal(got, want) {
		t.Fatalf("output %q, want %q (the fleet's own environment stays here, its markers go)", got, want)
	}
	// The turn's work: committed on the host, fetched into the branch, the
	// mirror reset to it, clean.
	if got := git(t, s.repo, "show", "fleet/s1/w1:made.txt"); got != "made" {
		t.Fatalf("made.txt on the branch: %q", got)
	}
	if head, tip := git(t, s.mirror, "rev-parse", "HEAD"), git(t, s.repo, "rev-parse", "fleet/s1/w1"); head != tip {
		t.Fatalf("mirror at %s, branch at %s", head, tip)
	}
	if st := git(t, s.mirror, "status", "--porcelain"); st != "" {
		t.Fatalf("mirror not clean: %q", st)
	}

	// A second turn on the same session, with a confirm answered here.
	if err := sess.Send(t.Context(), provider.Turn{Text: `echo '::confirm::Ship it?'; read ok; echo "answer $ok"; exit 3`}); err != nil {
		t.Fatal(err)
	}
	if te := rec.turnEnd(t, 2); te.ExitCode != 3 {
		t.Fatalf("turn 2: %+v", te)
	}
	if !slices.Contains(rec.asked, "Ship it?") {
		t.Fatalf("asked %q", rec.asked)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess.Done():
	default:
		t.Fatal("Close returned before the session was done")
	}
	if err := sess.Err(); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

// A host that goes silent (its link cut for longer than the lease) fails
// its worker with a reason that names it, and the work of its last turn
// is on the branch. When the host is back it stops the worker (no process
// left), and what the worker did meanwhile arrives, marked late, its work
// on a branch of its own.
func TestLostHostFailsItsWorker(t *testing.T) {
	var p *hoststest.Proxy
	s := newSetup(t, 3*time.Second, func(addr string) string { p = hoststest.StartProxy(t, addr); return p.Addr() })
	rec := &recorder{}
	sess := s.start(t, rec)
	if err := sess.Send(t.Context(), provider.Turn{Text: `echo first > first.txt`}); err != nil {
		t.Fatal(err)
	}
	rec.turnEnd(t, 1)
	marker := fmt.Sprintf("tick-%d", time.Now().UnixNano())
	if err := sess.Send(t.Context(), provider.Turn{Text: `echo going; echo later > later.txt; while true; do echo ` + marker + `; sleep 0.2; done`}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "the second turn's output", func() bool { return slices.Contains(rec.lines(), "going") })
	p.Cut()
	select {
	case <-sess.Done():
	case <-time.After(testwait.Bound):
		t.Fatal("the worker was not failed")
	}
	if err := sess.Err(); err == nil || !strings.Contains(err.Error(), "host h1 lost: not heard from for 3s") {
		t.Fatalf("err = %v", err)
	}
	// The engine closes a failed session at once; Close must not wait for
	// the host.
	closed := make(chan struct{})
	go func() { sess.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(testwait.Bound):
		t.Fatal("Close of a lost worker's session did not return")
	}
	if got := git(t, s.repo, "show", "fleet/s1/w1:first.txt"); got != "first" {
		t.Fatalf("first.txt on the branch: %q", got)
	}
	tipBefore := git(t, s.repo, "rev-parse", "fleet/s1/w1")

	p.Heal()
	notes := func() []string {
		var out []string
		for _, ev := range rec.all() {
			if n, ok := ev.(provider.Note); ok {
				out = append(out, n.Text)
			}
		}
		return out
	}
	testwait.For(t, testwait.Bound, "the late run to end", func() bool {
		return slices.ContainsFunc(notes(), func(n string) bool { return strings.Contains(n, "late from host h1: s1-w1 ended on the host") })
	})
	if !slices.ContainsFunc(rec.lines(), func(l string) bool { return l == "late from host h1: "+marker }) {
		t.Errorf("no late output marked as such; notes %q", notes())
	}
	if !slices.ContainsFunc(notes(), func(n string) bool { return strings.Contains(n, "Host h1 is back; it stops s1-w1") }) {
		t.Errorf("notes %q", notes())
	}
	if got := git(t, s.repo, "show", "fleet/s1/w1-late:later.txt"); got != "later" {
		t.Fatalf("later.txt on the late branch: %q", got)
	}
	if tip := git(t, s.repo, "rev-parse", "fleet/s1/w1"); tip != tipBefore {
		t.Fatalf("the worker's branch moved from %s to %s", tipBefore, tip)
	}
	testwait.For(t, testwait.Bound, "no process of the worker left", func() bool {
		return len(processesWith(marker)) == 0
	})
}

// A worker keeps running on its host while the fleet is down; the fleet
// started again (a new hub on the same store, a new remote.Fleet) takes it
// up with Adopt, and what it printed meanwhile arrives, then its turn's
// end.
func TestAdoptAfterTheFleetRestarted(t *testing.T) {
	var p *hoststest.Proxy
	s := newSetup(t, 5*time.Second, func(addr string) string { p = hoststest.StartProxy(t, addr); return p.Addr() })
	rec := &recorder{}
	sess := s.start(t, rec)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := sess.Send(t.Context(), provider.Turn{Text: `i=0; while [ ! -e '` + gate + `' ]; do i=$((i+1)); echo "n $i"; sleep 0.05; done; echo after > after.txt; echo done`}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "output before the crash", func() bool { return len(rec.lines()) >= 3 })

	// The fleet goes: its loops and its hub stop (as a killed process's
	// would), and a new hub starts on the same store and the same hosts.
	s.fleet.Close()
	s.hub.Close()
	before := len(rec.lines())
	hub2 := hoststest.StartHubIn(t, s.hub.Dir, 5*time.Second)
	p.Retarget(hub2.ListenAddr())
	p.Cut()
	p.Heal()
	fleet2 := remote.New(remote.Config{Hub: hub2.Hub, Lease: 5 * time.Second})
	t.Cleanup(fleet2.Close)
	rec2 := &recorder{}
	sess2, err := fleet2.Provider("h1", "local").(engine.Adopter).Adopt(t.Context(), provider.Spec{Agent: "w1", Role: provider.RoleWorker,
		Dir: s.mirror, Env: []string{provider.SessionEnv + "=s1"}}, rec2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess2.Close() })
	os.WriteFile(gate, nil, 0o644)
	if te := rec2.turnEnd(t, 1); te.Err != nil || te.ExitCode != 0 {
		t.Fatalf("the adopted turn: %+v", te)
	}
	// Every line once, in order, across both fleets: what the first took,
	// then the rest.
	all := append(rec.lines()[:before:before], rec2.lines()...)
	if all[len(all)-1] != "done" {
		t.Fatalf("last line %q", all[len(all)-1])
	}
	for i, l := range all[:len(all)-1] {
		if l != fmt.Sprintf("n %d", i+1) {
			t.Fatalf("line %d is %q (lines %q)", i+1, l, all)
		}
	}
	if got := git(t, s.repo, "show", "fleet/s1/w1:after.txt"); got != "after" {
		t.Fatalf("after.txt on the branch: %q", got)
	}
}

// A host that sends what is not an event batch (garbage, a gap in the
// numbering) fails that worker with a reason that says so; its other
// worker goes on.
func TestGarbageFromAHostFailsOnlyThatWorker(t *testing.T) {
	s := newSetup(t, hosts.DefaultLease, nil)
	git(t, s.repo, "worktree", "add", "-q", "-b", "fleet/s1/w2", filepath.Join(filepath.Dir(s.mirror), "w2"))
	rec1, rec2 := &recorder{}, &recorder{}
	sess1 := s.start(t, rec1)
	sess2, err := s.fleet.Provider("h1", "local").Start(t.Context(), provider.Spec{Agent: "w2", Role: provider.RoleWorker,
		Dir: filepath.Join(filepath.Dir(s.mirror), "w2"), Env: []string{provider.SessionEnv + "=s1"}}, rec2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess2.Close() })
	js, err := jetstream.New(s.hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	// What a misbehaving host puts in its own event stream.
	if _, err := js.Publish(t.Context(), wire.EventSubject("h1", "s1-w1"), []byte(`{"seq":1,"events":[{"k":"rm -rf"}]}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess1.Done():
	case <-time.After(testwait.Bound):
		t.Fatal("the worker fed garbage did not fail")
	}
	if err := sess1.Err(); err == nil || !strings.Contains(err.Error(), `host h1 sent what the fleet cannot take for s1-w1: event batch: event 1: unknown event kind "rm -rf"`) {
		t.Fatalf("err = %v", err)
	}
	if err := sess2.Send(t.Context(), provider.Turn{Text: "echo still fine"}); err != nil {
		t.Fatal(err)
	}
	if te := rec2.turnEnd(t, 1); te.Err != nil || !slices.Contains(rec2.lines(), "still fine") {
		t.Fatalf("w2's turn: %+v, lines %q", te, rec2.lines())
	}
}

// A message over the hub's payload limit from a program holding a host's
// credential never reaches the host's streams: the hub closes that
// connection, and the host's worker goes on.
func TestOversizedMessageFromAHostIsRefused(t *testing.T) {
	s := newSetup(t, hosts.DefaultLease, nil)
	rec := &recorder{}
	sess := s.start(t, rec)
	j := s.hub.Enrol(t, "h3")
	l, got := hoststest.DialLeaf(t, j, j.Seed, nil)
	if got != "PONG" {
		t.Fatalf("the raw leaf connection: %q", got)
	}
	size := wire.MaxMessage + 1
	l.Send(fmt.Sprintf("LMSG %s %d", wire.EventSubject("h3", "s1-w1"), size))
	if got := l.Next(); !strings.Contains(got, "Maximum Payload") {
		t.Fatalf("the hub answered %q, want a payload violation", got)
	}
	if got := l.Next(); got != "" {
		t.Fatalf("the connection is still open: %q", got)
	}
	if err := sess.Send(t.Context(), provider.Turn{Text: "echo unaffected"}); err != nil {
		t.Fatal(err)
	}
	if te := rec.turnEnd(t, 1); te.Err != nil || !slices.Contains(rec.lines(), "unaffected") {
		t.Fatalf("h1's worker: %+v, lines %q", te, rec.lines())
	}
}

// Enrolling another host while one is joined (the hub reloads its
// accounts) leaves the joined one working: its worker runs; and a worker
// on the new host runs at once.
func TestEnrolWhileJoined(t *testing.T) {
	s := newSetup(t, hosts.DefaultLease, nil)
	j2 := s.hub.Enrol(t, "h2")
	a2, err := hostagent.Start(t.Context(), hostagent.Config{Join: j2, WorkDir: filepath.Join(t.TempDir(), "work2"),
		Providers: map[string]provider.Provider{"local": &local.Provider{}}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Close)
	testwait.For(t, testwait.Bound, "h2 up", func() bool {
		c, _ := s.fleet.Candidates("local", "h2", "")
		return len(c) == 1
	})
	git(t, s.repo, "worktree", "add", "-q", "-b", "fleet/s1/w2", filepath.Join(filepath.Dir(s.mirror), "w2"))
	rec2 := &recorder{}
	start := time.Now()
	sess2, err := s.fleet.Provider("h2", "local").Start(t.Context(), provider.Spec{Agent: "w2", Role: provider.RoleWorker,
		Dir: filepath.Join(filepath.Dir(s.mirror), "w2"), Env: []string{provider.SessionEnv + "=s1"}}, rec2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess2.Close() })
	t.Logf("w2 on h2 started in %s", time.Since(start))
	if err := sess2.Send(t.Context(), provider.Turn{Text: "echo on h2"}); err != nil {
		t.Fatal(err)
	}
	if te := rec2.turnEnd(t, 1); te.Err != nil || !slices.Contains(rec2.lines(), "on h2") {
		t.Fatalf("w2's turn: %+v, lines %q", te, rec2.lines())
	}
	rec := &recorder{}
	sess := s.start(t, rec)
	if err := sess.Send(t.Context(), provider.Turn{Text: "echo after the reload"}); err != nil {
		t.Fatal(err)
	}
	if te := rec.turnEnd(t, 1); te.Err != nil || !slices.Contains(rec.lines(), "after the reload") {
		t.Fatalf("turn: %+v, lines %q", te, rec.lines())
	}
}

// processesWith is the pids whose command line holds s.
func processesWith(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) {
			out = append(out, e.Name())
		}
	}
	return out
}

var _ engine.Hosts = (*remote.Fleet)(nil)

// A worker lost with its host lives on as a late session; when the host is
// back and the worker is started again at once (the engine's /retry: the
// same run), the new session is the run's: the late one neither drops its
// events nor stops it, and the old run on the host gives way to it.
func TestStartAgainWhileTheLateRunLingers(t *testing.T) {
	var p *hoststest.Proxy
	s := newSetup(t, 3*time.Second, func(addr string) string { p = hoststest.StartProxy(t, addr); return p.Addr() })
	old := &recorder{}
	sess := s.start(t, old)
	marker := fmt.Sprintf("tick-%d", time.Now().UnixNano())
	if err := sess.Send(t.Context(), provider.Turn{Text: `echo going; while true; do echo ` + marker + `; sleep 0.2; done`}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "the turn's output", func() bool { return slices.Contains(old.lines(), "going") })
	p.Cut()
	select {
	case <-sess.Done():
	case <-time.After(testwait.Bound):
		t.Fatal("the worker was not failed")
	}
	sess.Close()

	p.Heal()
	testwait.For(t, testwait.Bound, "h1 up again", func() bool {
		c, _ := s.fleet.Candidates("local", "", "")
		return len(c) == 1
	})
	again := &recorder{}
	retry := s.start(t, again)
	if err := retry.Send(t.Context(), provider.Turn{Text: `echo again`}); err != nil {
		t.Fatal(err)
	}
	if end := again.turnEnd(t, 1); end.Err != nil || end.ExitCode != 0 {
		t.Fatalf("the new session's turn ended %+v", end)
	}
	if lines := again.lines(); !slices.Equal(lines, []string{"again"}) {
		t.Fatalf("the new session printed %q", lines)
	}
	testwait.For(t, testwait.Bound, "the old run's processes to end", func() bool {
		return len(processesWith(marker)) == 0
	})
	// The late session let go without touching the new one's run: it goes
	// on taking turns.
	if err := retry.Send(t.Context(), provider.Turn{Text: `echo still`}); err != nil {
		t.Fatal(err)
	}
	if end := again.turnEnd(t, 2); end.Err != nil {
		t.Fatalf("the new session's second turn ended %+v", end)
	}
}
