package hostagent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// fleetSide is what the fleet does with a host, by hand: the host's
// streams and bucket, the user's repository, claims, control requests and
// reading a run's events.
type fleetSide struct {
	host  string
	nc    *nats.Conn
	js    jetstream.JetStream
	store jetstream.ObjectStore
	repo  string // the user's repository
	base  string // its HEAD
}

// newFleet makes host's streams and bucket in its account, as the fleet
// does, and a user repository with one commit.
func newFleet(t *testing.T, hub *hoststest.Hub, host string) *fleetSide {
	t.Helper()
	f := &fleetSide{host: host, nc: hub.Conn(host)}
	var err error
	if f.js, err = jetstream.New(f.nc); err != nil {
		t.Fatal(err)
	}
	if f.store, err = wire.EnsureHostStreams(t.Context(), f.js, host); err != nil {
		t.Fatal(err)
	}
	f.repo = testDir(t)
	gitT(t, f.repo, "init", "-q", "-b", "main")
	put(t, filepath.Join(f.repo, "README"), "hello\n")
	gitT(t, f.repo, "add", "-A")
	gitT(t, f.repo, "commit", "-q", "-m", "initial")
	f.base = gitT(t, f.repo, "rev-parse", "HEAD")
	return f
}

// have asks the host which commits its cache of the repository holds.
func (f *fleetSide) have(t *testing.T) wire.HaveReply {
	t.Helper()
	var out wire.HaveReply
	f.request(t, wire.HaveSubject(f.host), wire.Have{Repo: f.repoID(t)}, &out)
	return out
}

func (f *fleetSide) repoID(t *testing.T) string {
	t.Helper()
	id, err := gitmove.RepoID(t.Context(), f.repo, f.base, gitmove.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// request sends v to subject and decodes the answer into out.
func (f *fleetSide) request(t *testing.T, subject string, v, out any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	f.requestRaw(t, subject, data, out)
}

// requestRaw is request with data as it is. The answer comes to a
// subject of the host's own: one the hub lets the host publish to, and so
// one its leaf node forwards (a host cannot answer on _INBOX).
func (f *fleetSide) requestRaw(t *testing.T, subject string, data []byte, out any) {
	t.Helper()
	inbox := hosts.Subject(f.host, "inbox", nonce())
	sub, err := f.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := f.nc.PublishRequest(subject, inbox, data); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(testwait.Bound)
	if err != nil {
		t.Fatalf("request on %s: %v", subject, err)
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		t.Fatalf("answer %q on %s: %v", m.Data, subject, err)
	}
}

// claim sends the base the host lacks, makes the run's events consumer
// and publishes the claim for worker of session s1 (edited by edit, when
// set), as the fleet does.
func (f *fleetSide) claim(t *testing.T, worker string, edit func(*wire.Start)) *fleetRun {
	t.Helper()
	have := f.have(t)
	sent, err := gitmove.SendBase(t.Context(), f.store, f.repo, f.base, have.Commits, gitmove.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	s := wire.Start{Claim: "s1-" + worker + "." + nonce(), Session: "s1", Worker: worker, Provider: "local", Repo: f.repoID(t), Base: f.base,
		BaseKey: sent.Key, Branch: "fleet/s1/" + worker, Env: []string{"AGENTS_FLEET_WORKER=" + worker}}
	if edit != nil {
		edit(&s)
	}
	r := f.watch(t, "s1-"+worker, 0)
	r.branch = s.Branch
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	f.publishClaim(t, data, r.key+".start."+s.Base+"."+nonce())
	return r
}

// publishClaim publishes a claim to the host's WORK stream.
func (f *fleetSide) publishClaim(t *testing.T, data []byte, id string) {
	t.Helper()
	if _, err := f.js.Publish(t.Context(), wire.WorkSubject(f.host), data, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

// fleetRun is the fleet's view of one claim's run: the events read so far.
type fleetRun struct {
	f      *fleetSide
	key    string
	branch string
	cons   jetstream.Consumer

	mu     sync.Mutex
	events []wire.Event
	next   uint64 // the seq the next batch must start at
	last   uint64 // the stream sequence of the last batch read
	cursor int    // events before it were looked at by waitEvent
}

// watch makes a consumer of key's events: the stream's new ones, or from
// stream sequence from.
func (f *fleetSide) watch(t *testing.T, key string, from uint64) *fleetRun {
	t.Helper()
	cfg := jetstream.ConsumerConfig{FilterSubject: wire.EventSubject(f.host, key), AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := f.js.CreateConsumer(t.Context(), wire.EventStream, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fleetRun{f: f, key: key, cons: cons, next: 1}
}

// pull reads the batches there are. Each must start where the last ended:
// the stream holds every event once, in order.
func (r *fleetRun) pull(t *testing.T) {
	t.Helper()
	batch, err := r.cons.FetchNoWait(256)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		b, err := wire.DecodeBatch(m.Data())
		if err != nil {
			t.Fatalf("batch of %s: %v", r.key, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		if b.Seq != r.next {
			r.mu.Unlock()
			t.Fatalf("batch of %s at seq %d, want %d: an event lost or sent twice", r.key, b.Seq, r.next)
		}
		r.next += uint64(len(b.Events))
		r.events = append(r.events, b.Events...)
		r.last = meta.Sequence.Stream
		r.mu.Unlock()
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits for the next event of kind after the cursor and moves
// the cursor past it; what came before it is returned too.
func (r *fleetRun) waitEvent(t *testing.T, kind string) (wire.Event, []wire.Event) {
	t.Helper()
	var got wire.Event
	var before []wire.Event
	testwait.For(t, testwait.Bound, r.key+" event "+kind, func() bool {
		r.pull(t)
		r.mu.Lock()
		defer r.mu.Unlock()
		i := slices.IndexFunc(r.events[r.cursor:], func(e wire.Event) bool { return e.Kind == kind })
		if i < 0 {
			return false
		}
		before = slices.Clone(r.events[r.cursor : r.cursor+i])
		got = r.events[r.cursor+i]
		r.cursor += i + 1
		return true
	})
	return got, before
}

// all is every event read.
func (r *fleetRun) all() []wire.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// control sends a control request for the run and returns the reply.
func (r *fleetRun) control(t *testing.T, c wire.Control) wire.Reply {
	t.Helper()
	var out wire.Reply
	r.f.request(t, wire.ControlSubject(r.f.host, r.key), c, &out)
	return out
}

// send starts a turn, which must be taken.
func (r *fleetRun) send(t *testing.T, text string) {
	t.Helper()
	if rep := r.control(t, wire.Control{Op: wire.OpSend, Text: text}); !rep.OK {
		t.Fatalf("send %q: %+v", text, rep)
	}
}

// fetch takes the branch event's bundle into the user's repository.
func (r *fleetRun) fetch(t *testing.T, e wire.Event) string {
	t.Helper()
	tip, err := gitmove.FetchBranch(t.Context(), r.f.store, e.Key, r.f.repo, r.branch, r.f.base, gitmove.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if tip != e.Commit {
		t.Fatalf("fetched %s, the branch event says %s", tip, e.Commit)
	}
	return tip
}

// outputLines are the stdout lines of events.
func outputLines(events []wire.Event) []string {
	var lines []string
	for _, e := range events {
		if e.Kind == wire.KindOutput && e.Stream == "stdout" {
			lines = append(lines, e.Lines...)
		}
	}
	return lines
}

// kinds are the kinds of events, in order.
func kinds(events []wire.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

// testDir is t.TempDir with symlinks resolved (git records resolved
// paths).
func testDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// gitT runs a test's git command in dir and returns its trimmed stdout.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Fleet Test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s (in %s): %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// put writes content to path.
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gitOut is git's trimmed output in dir, "" when it fails (a condition
// polled while the repository changes).
func gitOut(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
