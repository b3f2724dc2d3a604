package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// frameTypes returns the type of every NDJSON line of out, failing on a line
// that is not a frame.
func frameTypes(t *testing.T, out string) []string {
	t.Helper()
	var types []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		m, err := protocol.Decode([]byte(line))
		if err != nil {
			t.Fatalf("not a frame: %q: %v", line, err)
		}
		types = append(types, m.MessageType())
	}
	return types
}

func TestEventsReplayAndCount(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	confirm := &protocol.ConfirmRequest{ID: "confirm-1", Summary: "Deploy?", Ts: 1700000000000}
	tf.srv.Broadcast(confirm)
	tf.srv.Broadcast(&protocol.FleetState{Ts: 1, Workers: []protocol.FleetWorkerSummary{}})

	out, _, err := runCmd(t, newEventsCmd(), nil, "--count", "5")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"welcome", "hydrate", "confirmRequest", "fleetState", "replayEnd"}
	if got := frameTypes(t, out); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events --count 5 = %q, want %q", got, want)
	}
	// Frames are written exactly as the fleet encoded them.
	enc, _ := protocol.Encode(confirm)
	if !strings.Contains(out, "\n"+string(enc)) {
		t.Errorf("confirmRequest not printed byte for byte (%q):\n%s", enc, out)
	}

	out, _, err = runCmd(t, newEventsCmd(), nil, "alpha", "--type", "confirmRequest", "--count", "1")
	if err != nil {
		t.Fatal(err)
	}
	if got := frameTypes(t, out); len(got) != 1 || got[0] != "confirmRequest" {
		t.Fatalf("events --type confirmRequest = %q", got)
	}

	out, _, err = runCmd(t, newEventsCmd(), nil, "--type", "fleetState,replayEnd", "--count", "2")
	if err != nil {
		t.Fatal(err)
	}
	if got := frameTypes(t, out); strings.Join(got, " ") != "fleetState replayEnd" {
		t.Fatalf("events --type fleetState,replayEnd = %q", got)
	}
}

func TestEventsLive(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	tf.confirm("confirm-1", "Deploy?")

	// The fleet keeps talking until the command has printed its frame: no
	// need to know when it attached.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				tf.srv.Broadcast(&protocol.Reply{Text: "tick"})
			}
		}
	}()
	out, _, err := runCmd(t, newEventsCmd(), nil, "--live", "--count", "2")
	if err != nil {
		t.Fatal(err)
	}
	if got := frameTypes(t, out); strings.Join(got, " ") != "reply reply" {
		t.Fatalf("events --live = %q, want two live replies", got)
	}
}

func TestEventsFleetShutdown(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	r := startCmd(t, newEventsCmd(), nil, "--type", "replayEnd,confirmResolved")
	r.stdout.waitFor(t, `{"type":"replayEnd"}`)
	tf.stop()
	if err := r.wait(t); err != nil {
		t.Fatalf("events after shutdown = %v, want nil", err)
	}
	if got := frameTypes(t, r.stdout.String()); len(got) != 1 {
		t.Errorf("printed %q", got)
	}
}

func TestEventsBadFlags(t *testing.T) {
	testHome(t)
	if _, _, err := runCmd(t, newEventsCmd(), nil, "--count", "-1"); err == nil {
		t.Error("--count -1 accepted")
	}
	_, stderr, err := runCmd(t, newEventsCmd(), nil, "--type", "nosuchtype")
	if err == nil {
		t.Error("events with no fleet succeeded")
	}
	if !strings.Contains(stderr, `"nosuchtype" is not a message type`) {
		t.Errorf("no warning for an unknown type; stderr: %q", stderr)
	}
}

// The fleet replays its hub history inside hydrate: --type hubEvent prints
// those entries as hubEvent lines, and --count counts them, so the README's
// `fleet events --type hubEvent --count 5` ends on a fleet with history.
func TestEventsHubHistoryCounts(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	for i := range 3 {
		tf.srv.Broadcast(&protocol.HubEvent{From: "w1", Kind: protocol.HubCompleted, Ts: int64(1000 + i), Text: fmt.Sprintf("t%d done", i+1)})
	}
	out, _, err := runCmd(t, newEventsCmd(), nil, "--type", "hubEvent", "--count", "2")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"hubEvent","from":"w1","kind":"completed","ts":1000,"text":"t1 done"}` + "\n" +
		`{"type":"hubEvent","from":"w1","kind":"completed","ts":1001,"text":"t2 done"}` + "\n"
	if out != want {
		t.Fatalf("events --type hubEvent --count 2 =\n%s\nwant\n%s", out, want)
	}
	// With hydrate selected too, hydrate is printed as it came, entries inside.
	out, _, err = runCmd(t, newEventsCmd(), nil, "--type", "hubEvent,hydrate", "--count", "1")
	if err != nil {
		t.Fatal(err)
	}
	if got := frameTypes(t, out); len(got) != 1 || got[0] != "hydrate" || !strings.Contains(out, "t3 done") {
		t.Fatalf("events --type hubEvent,hydrate --count 1 = %s", out)
	}
	// --live leaves the history out.
	clients := func(n int) {
		t.Helper()
		testwait.For(t, testwait.Bound, fmt.Sprintf("the fleet to have %d clients", n), func() bool { return tf.srv.Stats().Clients == n })
	}
	clients(0) // the commands above have gone
	r := startCmd(t, newEventsCmd(), nil, "--live", "--type", "hubEvent", "--count", "1")
	// Attached means registered: what is broadcast from then on is live.
	clients(1)
	tf.srv.Broadcast(&protocol.HubEvent{From: "w2", Kind: protocol.HubCompleted, Ts: 2000, Text: "live one"})
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if out := r.stdout.String(); !strings.Contains(out, "live one") || strings.Contains(out, "t1 done") {
		t.Fatalf("events --live --type hubEvent --count 1 = %s", out)
	}
}

func TestHubEntries(t *testing.T) {
	raw := []byte(`{"type":"hydrate","conversation":[],"transcripts":[],"hub":[{"type":"hubEvent","from":"a","kind":"k","ts":1},{"from":"b","kind":"k","ts":2},{"type":"reply","text":"x"},{},7],"truncated":false}`)
	got := hubEntries(raw)
	want := []string{`{"type":"hubEvent","from":"a","kind":"k","ts":1}`, `{"type":"hubEvent","from":"b","kind":"k","ts":2}`, `{"type":"hubEvent"}`}
	if len(got) != len(want) {
		t.Fatalf("hubEntries = %q, want %q", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
}
