package journal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider/local"
	"github.com/agents-fleet/fleet/store"
)

// TestStalledStoreDoesNotFreezeTheEngine drives a real engine (the local
// provider) with the journal as its Publisher and Persister while another
// connection holds the database's write lock: thousands of prompts, each
// publishing and saving under the engine's lock, and the answer to a
// pending confirm, all return at once. Once the lock is released,
// everything is saved and forwarded in order, and the answered task goes
// on.
func TestStalledStoreDoesNotFreezeTheEngine(t *testing.T) {
	st := openStore(t)
	defer st.Close()
	pub := &waitingPublisher{}
	j := New(st, "s1", pub, nil)
	defer j.Close()
	e := engine.New(engine.Config{
		SessionID: "s1", SessionName: "stall", Cwd: t.TempDir(),
		Provider: &local.Provider{}, Publisher: j, Persister: j, Throttle: j.Throttle,
		Workers: 2, StatusInterval: 20 * time.Millisecond,
	})
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); e.Run(runCtx) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		stopRun()
		<-runDone
	}()

	e.Prompt("test", `$ echo '::confirm::go on?'; read x; echo "got $x"`)
	var confirmID string
	pub.wait(t, 20*time.Second, "the confirm request", func(ms []protocol.Message) bool {
		for _, m := range ms {
			if c, ok := m.(*protocol.ConfirmRequest); ok {
				confirmID = c.ID
				return true
			}
		}
		return false
	})
	e.Prompt("test", "/plan on") // the prompts below create tasks that wait, without a process each
	syncCtx, cancelSync := context.WithTimeout(context.Background(), 20*time.Second)
	j.Sync(syncCtx)
	cancelSync()

	release := stallStore(t, st)
	const prompts = 3000 // each publishes and saves several events: far more than QueueLen
	var want []string
	var slowest time.Duration
	start := time.Now()
	for i := range prompts {
		text := fmt.Sprintf("$ echo p%d", i)
		want = append(want, text)
		at := time.Now()
		e.Prompt("test", text)
		slowest = max(slowest, time.Since(at))
	}
	at := time.Now()
	if err := e.AnswerConfirm(confirmID, true, "answered"); err != nil {
		t.Fatal(err)
	}
	answer := time.Since(at)
	total := time.Since(start)
	t.Logf("%d prompts and an answer in %v while saving was stalled (slowest prompt %v, answer %v)", prompts, total, slowest, answer)
	if total > 5*time.Second {
		t.Fatalf("%d prompts and an answer took %v while saving was stalled (slowest prompt %v): the engine waits on the store",
			prompts, total, slowest)
	}
	for _, m := range pub.messages() {
		if u, ok := m.(*protocol.UserMessage); ok && u.Text == want[0] {
			t.Fatal("a prompt was forwarded before its batch could be saved")
		}
	}

	release()
	pub.wait(t, 30*time.Second, "the last prompt and the answered task's output", func(ms []protocol.Message) bool {
		last, got := false, false
		for _, m := range ms {
			switch m := m.(type) {
			case *protocol.UserMessage:
				last = last || m.Text == want[len(want)-1]
			case *protocol.Transcript:
				got = got || m.Text == "got yes"
			}
		}
		return last && got
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j.Sync(ctx)
	ms := pub.messages()
	if notSavedNotice(ms) {
		t.Fatal("saving failed: the stall outlasted the store's busy timeout (a very slow machine?)")
	}
	var prompted []string
	for _, m := range ms {
		if u, ok := m.(*protocol.UserMessage); ok && strings.HasPrefix(u.Text, "$ echo p") {
			prompted = append(prompted, u.Text)
		}
	}
	if !slices.Equal(prompted, want) {
		t.Fatalf("forwarded %d prompts, want %d in order", len(prompted), len(want))
	}
	l, err := st.Load(context.Background(), "s1", store.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tasks) != prompts+1 || l.Tasks[prompts].ID != fmt.Sprint("t", prompts+1) || !l.Tasks[prompts].Planned {
		t.Fatalf("saved %d tasks (last %+v), want %d", len(l.Tasks), l.Tasks[len(l.Tasks)-1], prompts+1)
	}
	if l.Counters["task"] != prompts+1 || l.ConversationTotal < prompts+2 {
		t.Fatalf("saved task counter %d, %d conversation entries", l.Counters["task"], l.ConversationTotal)
	}
}
