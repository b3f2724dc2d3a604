package intel

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/internal/sqlitefile"
)

func TestDefaultPath(t *testing.T) {
	if got, want := DefaultPath("/home/u/.fleet"), filepath.FromSlash("/home/u/.fleet/intel/fleet-intel.db"); got != want {
		t.Fatalf("DefaultPath = %q, want %q", got, want)
	}
}

func TestOpenCreates(t *testing.T) {
	home := t.TempDir()
	path := DefaultPath(home)
	s := openAt(t, path)
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(path), 0o700}, {path, 0o600}} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, st.Mode().Perm(), c.mode)
		}
	}
	var mode string
	if err := s.r.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if v := queryInt(t, s.r, `SELECT max(version) FROM schema_migrations`); v != int64(SchemaVersion()) {
		t.Fatalf("schema version %d, want %d", v, SchemaVersion())
	}
	if s.Path() != path {
		t.Fatalf("Path %q", s.Path())
	}
}

// TestOpenRejectsCorrupt: a file of random bytes, and one that starts like
// a SQLite database but is garbage after the header, are refused with
// ErrUnavailable naming the path, and left byte for byte as they were.
func TestOpenRejectsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
	}{{"random", ""}, {"header then garbage", sqlitefile.Header}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fleet-intel.db")
			junk := make([]byte, 8192)
			rand.Read(junk)
			copy(junk, tc.header)
			if err := os.WriteFile(path, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatal("Open accepted a corrupt file")
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want ErrUnavailable naming %s", err, path)
			}
			t.Log(err)
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, junk) {
				t.Fatal("Open changed the corrupt file")
			}
			for _, ext := range []string{"-wal", "-journal"} {
				if _, err := os.Stat(path + ext); err == nil {
					t.Errorf("Open left %s behind", path+ext)
				}
			}
		})
	}
}

// TestOpenLocked: while another connection holds the file exclusively,
// Open gives up after the busy timeout with ErrUnavailable.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet-intel.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	release := lockExclusive(t, path)
	defer release()
	s, err = Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a locked file")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("error %v: want ErrUnavailable naming %s and the lock", err, path)
	}
	t.Log(err)
}

// lockExclusive holds the database at path exclusively (locking_mode
// EXCLUSIVE: not even readers get in) from a second sql.DB, with a write
// transaction open, until release is called. Nothing else may have the
// file open.
func lockExclusive(t *testing.T, path string) (release func()) {
	t.Helper()
	return lock(t, path, "?_pragma=locking_mode(EXCLUSIVE)")
}

// lockWrite holds the write lock of the database at path (BEGIN EXCLUSIVE:
// in WAL mode, readers still read) from a second sql.DB until release.
func lockWrite(t *testing.T, path string) (release func()) {
	t.Helper()
	return lock(t, path, "")
}

func lock(t *testing.T, path, params string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", sqlitefile.FileURI(path)+params)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`BEGIN EXCLUSIVE`, `UPDATE totals SET runs = runs`} {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	return func() {
		conn.ExecContext(t.Context(), `ROLLBACK`)
		conn.Close()
		db.Close()
	}
}

func TestOpenTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet-intel.db")
	s := openAt(t, path)
	if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	s2, err := Open(path)
	if err == nil {
		s2.Close()
		t.Fatal("Open accepted a newer schema")
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errSchemaTooNew) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("Open changed a database it refused")
	}
	// The first openAt's cleanup closes s again: Close twice must be harmless.
}

func TestPrune(t *testing.T) {
	s := openT(t)
	write(t, s,
		record.Session{ID: "old-ended", StartedAt: ms(50 * day), EndedAt: ms(40 * day)},
		record.Session{ID: "old-running", StartedAt: ms(40 * day)},
		record.Session{ID: "recent", StartedAt: ms(40 * day), EndedAt: ms(2 * day)},
		record.Session{ID: "new", StartedAt: ms(hour)},
	)
	r := failedRun("old-ended", "codex", "$ go test", "FAIL ./x 1s", 40*day)
	r.Tools = map[string]int64{"shell": 2, "edit": 1}
	r.Skill, r.SkillVersion = "review", 1
	write(t, s, cat(runs(3, "oe", r), runs(2, "or", okRun("old-running", "claude", "fix it", 40*day)),
		runs(4, "re", okRun("recent", "claude", "fix it", 2*day)), runs(1, "nw", failedRun("new", "codex", "$ go test", "FAIL ./x 1s", hour)))...)
	write(t, s,
		record.Steering{SessionID: "old-ended", Source: "prompt", Text: "a", CreatedAt: ms(41 * day)},
		record.Steering{SessionID: "old-running", Source: "deny", Text: "git push", CreatedAt: ms(40 * day)},
		record.Steering{SessionID: "recent", Source: "tell", Text: "b", CreatedAt: ms(3 * day)},
	)
	if _, err := s.RegisterSkill(t.Context(), "review", "x"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(t.Context(), t0.Add(-30*day))
	if err != nil {
		t.Fatal(err)
	}
	if want := (PruneResult{Sessions: 2, Runs: 5, Steering: 2}); res != want {
		t.Fatalf("Prune = %+v, want %+v", res, want)
	}
	counts := countMap(t, s)
	for name, want := range map[string]int64{"sessions": 2, "runs": 5, "run_tools": 0, "steering": 1, "skills": 1} {
		if counts[name] != want {
			t.Errorf("%s: %d rows, want %d", name, counts[name], want)
		}
	}
	m, err := s.Intel(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	// Left: recent's 4 completed runs and new's 1 failure.
	if sum := m.Summary; sum.TotalAgentRuns != 5 || sum.FailedRuns != 1 || sum.SessionCount != 2 ||
		len(sum.TopErrors) != 1 || sum.TopErrors[0].Count != 1 || len(m.Skills) != 0 {
		t.Fatalf("after Prune: %+v skills %+v", sum, m.Skills)
	}
}

func countMap(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	cs, err := s.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64)
	for _, c := range cs {
		out[c.Name] = c.Count
	}
	if len(out) != len(entities) {
		t.Fatalf("counts %v", cs)
	}
	return out
}

// TestRunReplaced: a run recorded twice keeps only its last record, in the
// rows and in every aggregate.
func TestRunReplaced(t *testing.T) {
	s := openT(t)
	first := okRun("s1", "claude", "$ go test", hour)
	first.ID, first.InputTokens, first.Tools = "s1/w1/t1", 100, map[string]int64{"shell": 1, "read": 4}
	first.Skill, first.SkillVersion = "review", 1
	second := failedRun("s1", "claude", "$ go test", "FAIL ./a 1s", hour)
	second.ID, second.InputTokens, second.Tools = "s1/w1/t1", 250, map[string]int64{"shell": 3}
	second.Skill, second.SkillVersion = "review", 1
	write(t, s, first)
	write(t, s, second)
	c := countMap(t, s)
	if c["runs"] != 1 || c["run_tools"] != 1 {
		t.Fatalf("counts %v", c)
	}
	m, err := s.Intel(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if sum := m.Summary; sum.TotalAgentRuns != 1 || sum.FailedRuns != 1 || sum.TotalTokens != 250 || len(sum.TopErrors) != 1 {
		t.Fatalf("summary %+v", sum)
	}
	ev, err := s.Evolution(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Skills) != 1 || ev.Skills[0].Uses != 1 || ev.Skills[0].SuccessRate != 0 {
		t.Fatalf("skills %+v", ev.Skills)
	}
	if n := queryInt(t, s.r, `SELECT count FROM run_tools`); n != 3 {
		t.Fatalf("shell count %d", n)
	}
}

// TestTextsClipped: texts longer than MaxText are cut at a rune boundary.
func TestTextsClipped(t *testing.T) {
	s := openT(t)
	r := failedRun("s1", "claude", strings.Repeat("ü", record.MaxText), strings.Repeat("x", 3*record.MaxText), hour)
	r.ID = "s1/w1/t1"
	write(t, s, r, record.Steering{SessionID: "s1", Source: "prompt", Text: strings.Repeat("y", record.MaxText+1)})
	var task, errText, text string
	if err := s.r.QueryRow(`SELECT task, error FROM runs`).Scan(&task, &errText); err != nil {
		t.Fatal(err)
	}
	if err := s.r.QueryRow(`SELECT text FROM steering`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if len(task) != record.MaxText || len(errText) != record.MaxText || len(text) != record.MaxText {
		t.Fatalf("lengths %d %d %d", len(task), len(errText), len(text))
	}
}
