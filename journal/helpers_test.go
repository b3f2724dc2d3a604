package journal

import (
	"context"
	"database/sql"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

// stallStore holds the write lock of st's database from a second
// connection, as another fleet process in the middle of a long commit
// would: every Append that commits to SQLite waits (up to the store's
// busy timeout, 10 s) until release. release is idempotent and also runs
// at cleanup.
func stallStore(t *testing.T, st *store.Store) (release func()) {
	t.Helper()
	u := url.URL{Scheme: "file", Path: st.Path(), RawQuery: "_pragma=busy_timeout(10000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		db.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Errorf("release the write lock: %v", err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// waitingPublisher records what it is handed and lets a test wait for a
// condition on it.
type waitingPublisher struct {
	mu  sync.Mutex
	got []protocol.Message
}

func (p *waitingPublisher) Broadcast(m protocol.Message) {
	p.mu.Lock()
	p.got = append(p.got, m)
	p.mu.Unlock()
}

func (p *waitingPublisher) BroadcastBatch(ms []protocol.Message) {
	p.mu.Lock()
	p.got = append(p.got, ms...)
	p.mu.Unlock()
}

func (p *waitingPublisher) messages() []protocol.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// wait blocks until cond holds for what was forwarded, or fails the test
// after d.
func (p *waitingPublisher) wait(t *testing.T, d time.Duration, what string, cond func([]protocol.Message) bool) {
	t.Helper()
	if !testwait.Until(d, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return cond(p.got)
	}) {
		t.Fatalf("timed out after %v waiting for %s (%d messages forwarded)", d, what, len(p.messages()))
	}
}

// notSavedNotice reports a "session is not being saved" line: the stall
// outlasted the store's busy timeout, which this test must not take.
func notSavedNotice(ms []protocol.Message) bool {
	for _, m := range ms {
		if tr, ok := m.(*protocol.Transcript); ok && strings.HasPrefix(tr.Text, "The session is not being saved") {
			return true
		}
	}
	return false
}

// isSubsequence reports whether sub is sub's elements of all, in order.
func isSubsequence(sub, all []string) bool {
	i := 0
	for _, s := range all {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			if _, err := strconv.Atoi(s[len(prefix):]); err == nil {
				n++
			}
		}
	}
	return n
}
