package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

// TestKill9Soak kills the daemon with SIGKILL during a flood of task output
// and during a storm of native mutations, FLEET_SOAK times (scripts/
// kill9-soak.sh runs it 20 times), resuming the same session each time.
// After every restart: the databases open, every transcript line a console
// was told is stored, and every acknowledged receipt is present.
func TestKill9Soak(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("FLEET_SOAK"))
	if rounds <= 0 {
		t.Skip("set FLEET_SOAK=N to run N kill -9 rounds (scripts/kill9-soak.sh)")
	}
	e := e2etest.NewEnv(t)
	session := ""
	acked := map[string]map[string]any{} // operationId → body, across rounds
	ackedRev := map[string]int64{}
	for round := range rounds {
		args := []string{"--control-socket", "--native-root"}
		if session != "" {
			args = []string{"--control-socket", "--resume", session}
		}
		d := e.Start(args...)
		w := d.Dial(protocol.ClientOther, "witness")
		if session == "" {
			session = w.Welcome().SessionID
		}
		// Every receipt acknowledged in earlier rounds is still there.
		for op, body := range acked {
			r, err := nativeCall(d, body)
			if err != nil || r.Receipt == nil || r.Receipt.Revision != ackedRev[op] {
				t.Fatalf("round %d: receipt %s lost: %v %+v", round, op, err, r)
			}
		}
		list, err := nativeCall(d, map[string]any{"action": "list"})
		if err != nil || len(list.Roots) == 0 {
			t.Fatalf("round %d: list: %v", round, err)
		}
		root := list.Roots[0].ID

		// The flood, witnessed.
		told := map[string]bool{}
		var mu sync.Mutex
		witnessDone := make(chan struct{})
		go func() {
			defer close(witnessDone)
			for {
				m, _, _, err := w.Next()
				if err != nil {
					return
				}
				if tr, ok := m.(*protocol.Transcript); ok && strings.HasPrefix(tr.Text, fmt.Sprintf("r%d-", round)) {
					mu.Lock()
					told[tr.Agent+"|"+tr.Text] = true
					mu.Unlock()
				}
			}
		}()
		if _, err := w.Prompt(fmt.Sprintf("$ seq 1 100000 | sed 's/^/r%d-/'", round)); err != nil {
			t.Fatal(err)
		}
		// The storm, from two clients.
		stop := make(chan struct{})
		storm := mutationStorm(d, root, fmt.Sprintf("soak-%d", round), 2, stop, func(op string, body map[string]any, rev int64) {
			mu.Lock()
			acked[op], ackedRev[op] = body, rev
			mu.Unlock()
		})
		// Kill mid-flood, at a different point each round.
		want := 500 + 4000*(round%5)
		// A slow flood is killed wherever it got to after 15 s.
		testwait.Until(15*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(told) >= want
		})
		d.Cmd.Process.Signal(syscall.SIGKILL)
		<-d.Done
		close(stop)
		storm.Wait()
		w.Close()
		<-witnessDone

		stored := storedLines(t, e.Home, session)
		mu.Lock()
		for line := range told {
			if !stored[line] {
				t.Fatalf("round %d: %q was told to a console but is not stored", round, line)
			}
		}
		t.Logf("round %d: %d lines told, all stored; %d receipts acknowledged so far", round, len(told), len(acked))
		mu.Unlock()
	}
	raw, _ := json.Marshal(len(acked))
	t.Logf("acknowledged receipts over all rounds: %s", raw)
}

// A clean shutdown in the middle of a flood loses nothing that was told and
// leaves no files behind.
func TestCleanShutdownUnderLoad(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	w := d.Dial(protocol.ClientOther, "witness")
	session := w.Welcome().SessionID
	told := map[string]bool{}
	var mu sync.Mutex
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			m, _, _, err := w.Next()
			if err != nil {
				return
			}
			if tr, ok := m.(*protocol.Transcript); ok && tr.Role == protocol.RoleTool {
				mu.Lock()
				told[tr.Agent+"|"+tr.Text] = true
				mu.Unlock()
			}
		}
	}()
	w.Prompt("$ seq 1 2000000")
	testwait.For(t, 15*time.Second, "20,000 lines told before the stop", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told) >= 20000
	})
	start := time.Now()
	d.Stop() // SIGTERM; fails unless the exit is clean
	t.Logf("shutdown under load took %s", time.Since(start))
	<-closed
	for _, p := range []string{d.Desc.SocketPath, d.Desc.TokenPath, filepath.Join(e.Home, "sockets", d.Desc.ID+".json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
	// The transcript log was moved into the database and deleted.
	if logs, _ := filepath.Glob(filepath.Join(e.Home, "state", "fleet.db-transcripts", "*")); len(logs) != 0 {
		t.Errorf("transcript log or its lock left behind: %v", logs)
	}
	if locks, _ := filepath.Glob(filepath.Join(e.Home, "state", "sessions", "*.lock")); len(locks) != 0 {
		t.Errorf("session lock left behind: %v", locks)
	}
	stored := storedLines(t, e.Home, session)
	mu.Lock()
	defer mu.Unlock()
	if len(told) < 20000 {
		t.Fatalf("only %d lines told", len(told))
	}
	for line := range told {
		if !stored[line] {
			t.Fatalf("%q was told but not stored", line)
		}
	}
}

// storedLines opens the session database under home (taking over what a
// dead fleet left in its transcript log) and returns every transcript line
// of session as "agent|text".
func storedLines(t *testing.T, home, session string) map[string]bool {
	t.Helper()
	st, err := store.Open(filepath.Join(home, "state", "fleet.db"))
	if err != nil {
		t.Fatalf("the session DB does not open: %v", err)
	}
	defer st.Close()
	loaded, err := st.Load(context.Background(), session, store.Limits{Conversation: 1, TranscriptPerAgent: 1 << 22, TranscriptAgents: 1 << 10, Hub: 1})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for agent, lines := range loaded.Transcripts {
		for _, l := range lines {
			stored[agent+"|"+l.Text] = true
		}
	}
	return stored
}
