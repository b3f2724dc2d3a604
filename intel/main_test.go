package intel

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/intel/record"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the tests' "now".
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ms is t0 minus d, in epoch ms.
func ms(d time.Duration) int64 { return t0.Add(-d).UnixMilli() }

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

// openT opens a store in a fresh directory, closed at cleanup.
func openT(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "intel", "fleet-intel.db"))
}

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return t0 }
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// write writes records straight to the store, in one transaction.
func write(t testing.TB, s *Store, recs ...any) {
	t.Helper()
	items := make([]item, len(recs))
	for i, r := range recs {
		switch r := r.(type) {
		case record.Session:
			items[i] = item{kind: itemSession, sess: r}
		case record.Run:
			items[i] = item{kind: itemRun, run: r}
		case record.Steering:
			items[i] = item{kind: itemSteering, steer: r}
		default:
			t.Fatalf("record %T", r)
		}
	}
	if err := s.writeItems(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// runs returns n copies of r with ids prefix-0 … prefix-(n-1).
func runs(n int, prefix string, r record.Run) []any {
	out := make([]any, n)
	for i := range out {
		x := r
		x.ID = prefix + "-" + itoa(i)
		out[i] = x
	}
	return out
}

func itoa(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// failed / ok make a settled run of a session at age ago.
func okRun(session, provider, task string, ago time.Duration) record.Run {
	return record.Run{SessionID: session, Provider: provider, Task: task, Repo: "/repo", Outcome: record.OutcomeCompleted,
		StartedAt: ms(ago) - 1000, EndedAt: ms(ago)}
}

func failedRun(session, provider, task, errText string, ago time.Duration) record.Run {
	r := okRun(session, provider, task, ago)
	r.Outcome, r.Cause, r.ExitCode, r.Error = record.OutcomeFailed, record.CauseExit, 1, errText
	return r
}

func queryInt(t testing.TB, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func cat(groups ...[]any) []any {
	var out []any
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}
