package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/agents-fleet/fleet/internal/sqlmigrate"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openT opens a store at path, closed at the end of the test.
func openT(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openDirectT is openT for a store whose Append saves transcript lines
// straight to SQLite, as it does when another Store holds a session's
// transcript log (tests of the commit path itself).
func openDirectT(t testing.TB, path string) *Store {
	t.Helper()
	s := openT(t, path)
	s.noLog = true
	return s
}

func newSession(id string, startedAt int64) Session {
	return Session{ID: id, Name: "name-" + id, Cwd: "/repo/" + id, Provider: "local", Model: "m",
		Mode: ModeLegacy, RepoRoot: "/repo", StartedAt: startedAt}
}

func createT(t testing.TB, s *Store, sess Session) {
	t.Helper()
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession(%s): %v", sess.ID, err)
	}
}

func appendT(t testing.TB, s *Store, id string, recs ...Record) {
	t.Helper()
	if err := s.Append(t.Context(), id, recs); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func loadT(t testing.TB, s *Store, id string, lim Limits) *Loaded {
	t.Helper()
	l, err := s.Load(t.Context(), id, lim)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return l
}

func line(agent, text string, ts int64) Record {
	return Record{Transcript: &TranscriptLine{Agent: agent, Role: "tool", Text: text, Stream: "stdout", Ts: ts}}
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecentAgentsAmongMany: with 5,000 agents in a session (and others
// in another session), Load picks the most recently active ones, newest
// activity first, and takes milliseconds.
func TestRecentAgentsAmongMany(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	createT(t, s, newSession("s2", 2))
	const n = 5000
	var recs []Record
	for i := range n {
		recs = append(recs, line(fmt.Sprint("w", i), fmt.Sprint("line of w", i), int64(i+1)))
	}
	for i := 0; i < n; i += 500 {
		appendT(t, s, "s1", recs[i:i+500]...)
	}
	appendT(t, s, "s2", line("other", "x", 1))
	// w17 becomes the most recent, then w3.
	appendT(t, s, "s1", line("w17", "again", n+1))
	appendT(t, s, "s1", line("w3", "again", n+2))
	t0 := time.Now()
	l := loadT(t, s, "s1", Limits{TranscriptAgents: 4})
	took := time.Since(t0)
	var agents []string
	got := map[string]bool{}
	for a := range l.Transcripts {
		agents = append(agents, a)
		got[a] = true
	}
	t.Logf("Load of a session with %d agents: %v", n, took)
	for _, want := range []string{"w3", "w17", fmt.Sprint("w", n-1), fmt.Sprint("w", n-2)} {
		if !got[want] {
			t.Errorf("agents %v, want %s among them", agents, want)
		}
	}
	if len(got) != 4 || got["other"] {
		t.Errorf("agents %v", agents)
	}
}

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := sqlmigrate.Load(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Version != i+1 || m.SQL == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"migrations/0001_a.sql": {Data: []byte("x")}, "migrations/0003_c.sql": {Data: []byte("x")}},
		"unpadded": {"migrations/1_a.sql": {Data: []byte("x")}},
		"empty":    {},
	} {
		if _, err := sqlmigrate.Load(fsys); err == nil {
			t.Errorf("%s: sqlmigrate.Load accepted a bad list", name)
		}
	}
}

func TestOpenFresh(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "sub", "fleet.db")
	s := openT(t, path)
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	var v, n int
	if err := s.r.QueryRow(`SELECT max(version), count(*) FROM schema_migrations`).Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() || n != SchemaVersion() {
		t.Errorf("schema_migrations: max %d, rows %d; want %d", v, n, SchemaVersion())
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1"} {
		var got string
		if err := s.w.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
	var ms int
	if err := s.w.QueryRow("PRAGMA busy_timeout").Scan(&ms); err != nil || ms < 1000 {
		t.Errorf("busy_timeout = %d, %v", ms, err)
	}
	// The read pool must refuse writes.
	if _, err := s.r.Exec(`DELETE FROM sessions`); err == nil {
		t.Error("read pool accepted a write")
	}
}

func TestReopenIsNoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	createT(t, s, newSession("s1", 1))
	var before string
	s.r.QueryRow(`SELECT group_concat(version || ':' || applied_at) FROM schema_migrations`).Scan(&before)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s = openT(t, path)
	var after string
	s.r.QueryRow(`SELECT group_concat(version || ':' || applied_at) FROM schema_migrations`).Scan(&after)
	if before == "" || before != after {
		t.Errorf("schema_migrations changed on reopen: %q → %q", before, after)
	}
	if _, err := s.GetSession(t.Context(), "s1"); err != nil {
		t.Errorf("session lost on reopen: %v", err)
	}
}

func TestFutureSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	createT(t, s, newSession("s1", 1))
	if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	// A rollback-journal file: switching it to WAL would be a write. Only
	// the write connection may stay open for that.
	s.r.Close()
	s.ckOnce.Do(func() { s.ckErr = s.ck.close() })
	if s.ckErr != nil {
		t.Fatal(s.ckErr)
	}
	if _, err := s.w.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, path)

	_, err = Open(path)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer schema: %v; want ErrSchemaTooNew naming %s", err, path)
	}
	t.Log(err)
	if !bytes.Equal(before, fileBytes(t, path)) {
		t.Error("the refused database file was modified")
	}
}

func TestNotADatabase(t *testing.T) {
	for name, content := range map[string][]byte{
		"garbage": bytes.Repeat([]byte("not a database, just text\n"), 400),
		"short":   []byte("SQLite"),
		"binary":  {0, 1, 2, 3, 0xff, 0xfe},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fleet.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a SQLite database") {
				t.Fatalf("Open(garbage) = %v; want an error naming the path", err)
			}
			t.Log(err)
			if !bytes.Equal(content, fileBytes(t, path)) {
				t.Error("the garbage file was modified")
			}
			for _, suffix := range []string{"-wal", "-shm", "-journal"} {
				if _, err := os.Stat(path + suffix); err == nil {
					t.Errorf("%s was created", path+suffix)
				}
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		path := t.TempDir()
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open(dir) = %v", err)
		}
	})
	t.Run("empty path", func(t *testing.T) {
		if _, err := Open(""); err == nil {
			t.Fatal("Open(\"\") succeeded")
		}
	})
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "fleet.db")
	s := openT(t, path)
	createT(t, s, newSession("s1", 1))
	appendT(t, s, "s1", line("w1", "x", 1))
	// Hold a read transaction open so the -wal and -shm files exist.
	tx, err := s.r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	tx.QueryRow(`SELECT count(*) FROM sessions`).Scan(&n)

	check := func(p string, want os.FileMode) {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("stat: %v", err)
			return
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	check(dir, 0o700)
	check(path, 0o600)
	check(path+"-wal", 0o600)
	check(path+"-shm", 0o600)
}

func TestCreateSession(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	ctx := t.Context()
	createT(t, s, newSession("s1", 1))
	if err := s.CreateSession(ctx, newSession("s1", 2)); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate id: %v, want ErrExists", err)
	}
	bad := newSession("s2", 1)
	bad.Mode = ""
	if err := s.CreateSession(ctx, bad); err == nil {
		t.Error("empty mode accepted")
	}
	if err := s.CreateSession(ctx, Session{Mode: ModeLegacy}); err == nil {
		t.Error("empty id accepted")
	}
	native := newSession("s3", 5)
	native.Mode = ModeNative
	native.RepoRoot = ""
	createT(t, s, native)
	got, err := s.GetSession(ctx, "s3")
	if err != nil {
		t.Fatal(err)
	}
	native.LastActive = native.StartedAt
	if !reflect.DeepEqual(got, native) {
		t.Errorf("GetSession = %+v, want %+v", got, native)
	}
}

// weird holds strings a round trip must keep byte for byte.
var weird = []string{"", "plain", "invalid \xff\xfe utf-8", "nul\x00inside", "tab\tand\r\nnewlines", "ünïcödé ✓ 🚀",
	strings.Repeat("long line ", 20000)}

func TestRoundTripEveryKind(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	s.now = func() int64 { return 4242 }
	createT(t, s, newSession("s1", 1))

	var recs []Record
	var wantConv []ConversationEntry
	var wantLines []TranscriptLine
	var wantHub []HubEvent
	for i, w := range weird {
		c := ConversationEntry{Role: "user", Source: "repl" + w, Text: w, RequestID: "r" + w, Ts: int64(-i)}
		l := TranscriptLine{Agent: "w1", Role: "tool", Text: w, Stream: "stderr", Ts: int64(i) << 40}
		h := HubEvent{From: "w1" + w, Kind: "report", To: w, Text: w, Ts: int64(i)}
		wantConv, wantLines, wantHub = append(wantConv, c), append(wantLines, l), append(wantHub, h)
		recs = append(recs, Record{Conversation: &c}, Record{Transcript: &l}, Record{Hub: &h})
	}
	task := Task{ID: "t1", Command: "$ echo \xff", Status: "running", Worker: "w1", Reason: "", CreatedAt: 10, UpdatedAt: 11,
		Attempt: 1, LoopID: "l1", Planned: true}
	worker := Worker{ID: "w1", TaskID: "t1", Status: "running", WorktreePath: "/wt/w1", Branch: "fleet/s1/w1", BaseCommit: "abc",
		StartedAt: 12, LastActivityAt: 13, ToolUses: 3, Provider: "claude", Model: "sonnet \xff", AgentSessionID: "sess-1",
		InputTokens: 1 << 40, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, Prompt: weird[len(weird)-1]}
	coord := Coordinator{Provider: "codex", Model: "gpt", SessionID: "thread-\x00-1"}
	recs = append(recs, Record{Task: &task}, Record{Worker: &worker},
		Record{Counter: &Counter{Name: "nextTask", Value: 2}}, Record{Counter: &Counter{Name: "big", Value: -1 << 62}},
		Record{Coordinator: &Coordinator{Provider: "claude", SessionID: "replaced"}}, Record{Coordinator: &coord})
	appendT(t, s, "s1", recs...)
	if err := s.Append(t.Context(), "s1", nil); err != nil {
		t.Errorf("empty Append: %v", err)
	}

	l := loadT(t, s, "s1", Limits{})
	if !reflect.DeepEqual(l.Conversation, wantConv) {
		t.Errorf("conversation:\n got %+v\nwant %+v", l.Conversation, wantConv)
	}
	if l.ConversationTotal != len(wantConv) {
		t.Errorf("ConversationTotal = %d", l.ConversationTotal)
	}
	if !reflect.DeepEqual(l.Transcripts, map[string][]TranscriptLine{"w1": wantLines}) {
		t.Errorf("transcripts:\n got %+v\nwant %+v", l.Transcripts, wantLines)
	}
	if !reflect.DeepEqual(l.Hub, wantHub) {
		t.Errorf("hub:\n got %+v\nwant %+v", l.Hub, wantHub)
	}
	if !reflect.DeepEqual(l.Tasks, []Task{task}) || !reflect.DeepEqual(l.Workers, []Worker{worker}) {
		t.Errorf("tasks %+v workers %+v", l.Tasks, l.Workers)
	}
	if !reflect.DeepEqual(l.Counters, map[string]int64{"nextTask": 2, "big": -1 << 62}) {
		t.Errorf("counters %v", l.Counters)
	}
	if l.Coordinator != coord {
		t.Errorf("coordinator %+v, want %+v", l.Coordinator, coord)
	}
	if l.Session.LastActive != 4242 || l.Session.Tasks != (TaskCounts{Running: 1, Total: 1}) {
		t.Errorf("session %+v", l.Session)
	}
	if n, err := s.TranscriptCount(t.Context(), "s1"); err != nil || n != int64(len(weird)) {
		t.Errorf("TranscriptCount = %d, %v", n, err)
	}
}

func TestAppendRefusals(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	ctx := t.Context()
	createT(t, s, newSession("s1", 1))
	if err := s.Append(ctx, "nope", []Record{line("w", "x", 1)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if !(&Record{}).IsZero() || (&Record{Hub: &HubEvent{}}).IsZero() {
		t.Error("IsZero is wrong")
	}
	for name, r := range map[string]Record{
		"empty":     {},
		"two":       {Transcript: &TranscriptLine{}, Hub: &HubEvent{}},
		"task id":   {Task: &Task{}},
		"worker id": {Worker: &Worker{}},
		"counter":   {Counter: &Counter{}},
	} {
		// A bad record anywhere refuses the whole batch.
		if err := s.Append(ctx, "s1", []Record{line("w", "x", 1), r}); err == nil {
			t.Errorf("%s record accepted", name)
		}
	}
	if n, _ := s.TranscriptCount(ctx, "s1"); n != 0 {
		t.Errorf("a refused batch wrote %d lines", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Append(cancelled, "s1", []Record{line("w", "x", 1)}); err == nil {
		t.Error("Append with a cancelled context succeeded")
	}
	appendT(t, s, "s1", line("w", "after", 2))
	if n, _ := s.TranscriptCount(ctx, "s1"); n != 1 {
		t.Errorf("TranscriptCount = %d, want 1", n)
	}
}

func TestUpsertsInPlace(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("t%d", i)
		appendT(t, s, "s1",
			Record{Task: &Task{ID: id, Command: "cmd" + id, Status: "pending", CreatedAt: int64(i)}},
			Record{Worker: &Worker{ID: "w" + id, TaskID: id, Status: "running"}},
			Record{Counter: &Counter{Name: "nextTask", Value: int64(i + 1)}})
	}
	// Update t2 twice in one batch and t1 once later: positions keep.
	appendT(t, s, "s1",
		Record{Task: &Task{ID: "t2", Command: "cmdt2", Status: "running", Worker: "wt2", UpdatedAt: 5, Attempt: 1}},
		Record{Task: &Task{ID: "t2", Command: "cmdt2", Status: "failed", Worker: "wt2", Reason: "exit 1", UpdatedAt: 6, Attempt: 1}},
		Record{Worker: &Worker{ID: "wt2", TaskID: "t2", Status: "failed", EndedAt: 6, ToolUses: 4}})
	appendT(t, s, "s1", Record{Task: &Task{ID: "t1", Status: "done"}})

	l := loadT(t, s, "s1", Limits{})
	var ids, statuses []string
	for _, tk := range l.Tasks {
		ids, statuses = append(ids, tk.ID), append(statuses, tk.Status)
	}
	if fmt.Sprint(ids, statuses) != "[t1 t2 t3] [done failed pending]" {
		t.Errorf("tasks %v %v", ids, statuses)
	}
	if l.Tasks[1] != (Task{ID: "t2", Command: "cmdt2", Status: "failed", Worker: "wt2", Reason: "exit 1", UpdatedAt: 6, Attempt: 1}) {
		t.Errorf("t2 = %+v", l.Tasks[1])
	}
	if len(l.Workers) != 3 || l.Workers[1] != (Worker{ID: "wt2", TaskID: "t2", Status: "failed", EndedAt: 6, ToolUses: 4}) {
		t.Errorf("workers %+v", l.Workers)
	}
	if l.Counters["nextTask"] != 4 || len(l.Counters) != 1 {
		t.Errorf("counters %v", l.Counters)
	}
	if l.Session.Tasks != (TaskCounts{Pending: 1, Done: 1, Failed: 1, Total: 3}) {
		t.Errorf("counts %+v", l.Session.Tasks)
	}
}

func TestLoadLimits(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	createT(t, s, newSession("other", 1))
	ts := int64(0)
	var recs []Record
	for i := range 30 {
		ts++
		recs = append(recs, Record{Conversation: &ConversationEntry{Role: "user", Text: fmt.Sprint("c", i), Ts: ts}},
			Record{Hub: &HubEvent{From: "coordinator", Kind: "message", Text: fmt.Sprint("h", i), Ts: ts}})
	}
	// Agents a0..a9 write 20 lines each in turn; then a3 and a0 write again,
	// so the activity order (newest first) is a0, a3, a9, a8, …
	for a := range 10 {
		for i := range 20 {
			ts++
			recs = append(recs, line(fmt.Sprint("a", a), fmt.Sprint(a, "-", i), ts))
		}
	}
	appendT(t, s, "s1", recs...)
	appendT(t, s, "s1", line("a3", "3-late", 1000))
	appendT(t, s, "s1", line("a0", "0-late", 1001))
	appendT(t, s, "other", line("a1", "other session", 1))

	l := loadT(t, s, "s1", Limits{Conversation: 5, TranscriptPerAgent: 3, TranscriptAgents: 4, Hub: 7})
	if len(l.Conversation) != 5 || l.Conversation[0].Text != "c25" || l.Conversation[4].Text != "c29" || l.ConversationTotal != 30 {
		t.Errorf("conversation window %v total %d", l.Conversation, l.ConversationTotal)
	}
	if len(l.Hub) != 7 || l.Hub[0].Text != "h23" || l.Hub[6].Text != "h29" {
		t.Errorf("hub window %v", l.Hub)
	}
	got := map[string]string{}
	for agent, lines := range l.Transcripts {
		var texts []string
		for _, ln := range lines {
			if ln.Agent != agent {
				t.Errorf("line %+v under agent %s", ln, agent)
			}
			texts = append(texts, ln.Text)
		}
		got[agent] = strings.Join(texts, ",")
	}
	want := map[string]string{"a0": "0-18,0-19,0-late", "a3": "3-18,3-19,3-late", "a9": "9-17,9-18,9-19", "a8": "8-17,8-18,8-19"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("transcripts %v, want %v", got, want)
	}

	// Defaults, and negative limits reading nothing.
	l = loadT(t, s, "s1", Limits{})
	if len(l.Conversation) != 30 || len(l.Transcripts) != 10 || len(l.Transcripts["a0"]) != 21 || len(l.Hub) != 30 {
		t.Errorf("default limits: %d conv, %d agents, %d a0 lines, %d hub", len(l.Conversation), len(l.Transcripts), len(l.Transcripts["a0"]), len(l.Hub))
	}
	l = loadT(t, s, "s1", Limits{Conversation: -1, TranscriptPerAgent: -1, TranscriptAgents: -1, Hub: -1})
	if len(l.Conversation) != 0 || len(l.Transcripts) != 0 || len(l.Hub) != 0 || l.ConversationTotal != 30 {
		t.Errorf("negative limits: %+v", l)
	}
	if _, err := s.Load(t.Context(), "s", Limits{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load by prefix: %v, want ErrNotFound (Load takes an exact id)", err)
	}
}

// TestLastActiveAtMostEverySecond: batches of transcript lines move the
// session's last_active once a second at most; conversation and hub
// entries (which change its counts) always do.
func TestLastActiveAtMostEverySecond(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	clock := int64(10_000)
	s.now = func() int64 { return clock }
	createT(t, s, newSession("s1", 1))
	lastActive := func() int64 {
		t.Helper()
		ss, err := s.GetSession(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		return ss.LastActive
	}
	for _, step := range []struct {
		clock int64
		rec   Record
		want  int64
	}{
		{10_000, line("w1", "a", 1), 10_000},
		{10_500, line("w1", "b", 2), 10_000},
		{10_999, line("w1", "c", 3), 10_000},
		{11_000, line("w1", "d", 4), 11_000},
		{11_100, Record{Conversation: &ConversationEntry{Role: "user", Text: "hi", Ts: 5}}, 11_100},
		{11_200, Record{Task: &Task{ID: "t1", Status: "running"}}, 11_100},
		{5_000, line("w1", "e", 6), 5_000}, // the clock went back
	} {
		clock = step.clock
		appendT(t, s, "s1", step.rec)
		if got := lastActive(); got != step.want {
			t.Errorf("at %d: last_active %d, want %d", step.clock, got, step.want)
		}
	}
}

func TestSessionsAndGetSession(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	ctx := t.Context()
	clock := int64(100)
	s.now = func() int64 { return clock }
	for i, id := range []string{"abc-1", "abd-2", "xyz", "ab"} {
		createT(t, s, newSession(id, int64(i)))
	}
	clock = 200
	appendT(t, s, "abd-2",
		Record{Task: &Task{ID: "t1", Status: "pending"}}, Record{Task: &Task{ID: "t2", Status: "running"}},
		Record{Task: &Task{ID: "t3", Status: "blocked"}}, Record{Task: &Task{ID: "t4", Status: "done"}},
		Record{Task: &Task{ID: "t5", Status: "failed"}}, Record{Task: &Task{ID: "t6", Status: "odd"}})
	clock = 300
	appendT(t, s, "xyz", Record{Task: &Task{ID: "t1", Status: "done"}})

	list, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ss := range list {
		order = append(order, ss.ID)
	}
	// Newest LastActive first; a session never appended to has
	// LastActive = StartedAt.
	if strings.Join(order, " ") != "xyz abd-2 ab abc-1" {
		t.Errorf("Sessions order %v", order)
	}
	if list[1].Tasks != (TaskCounts{1, 1, 1, 1, 1, 6}) || list[0].Tasks != (TaskCounts{Done: 1, Total: 1}) || list[2].Tasks != (TaskCounts{}) {
		t.Errorf("counts %+v %+v %+v", list[0].Tasks, list[1].Tasks, list[2].Tasks)
	}

	for _, c := range []struct{ q, want string }{{"xyz", "xyz"}, {"x", "xyz"}, {"abd", "abd-2"}, {"abc", "abc-1"}, {"ab", "ab"}} {
		got, err := s.GetSession(ctx, c.q)
		if err != nil || got.ID != c.want {
			t.Errorf("GetSession(%q) = %q, %v; want %q", c.q, got.ID, err, c.want)
		}
	}
	if got, _ := s.GetSession(ctx, "abd"); got.Tasks.Total != 6 || got.Name != "name-abd-2" {
		t.Errorf("GetSession(abd) = %+v", got)
	}
	_, err = s.GetSession(ctx, "a")
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "abc-1") || !strings.Contains(err.Error(), "abd-2") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	for _, q := range []string{"nope", "abe", "xyzz", ""} {
		if _, err := s.GetSession(ctx, q); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetSession(%q): %v, want ErrNotFound", q, err)
		}
	}
}

func TestAmbiguityListIsCapped(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	for i := range 15 {
		createT(t, s, newSession(fmt.Sprintf("s%02d", i), 1))
	}
	_, err := s.GetSession(t.Context(), "s")
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "s09, …") || strings.Contains(err.Error(), "s10") {
		t.Errorf("GetSession(s) = %v", err)
	}
}

func TestClosed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	createT(t, s, newSession("s1", 1))
	s.Close()
	ctx := t.Context()
	if err := s.Append(ctx, "s1", []Record{line("w", "x", 1)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := s.CreateSession(ctx, newSession("s2", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateSession after Close: %v", err)
	}
	if _, err := s.Load(ctx, "s1", Limits{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
}

// TestConcurrentAppend runs writers on different sessions and readers at
// once (meant for -race) and checks that nothing was lost or mixed up.
func TestConcurrentAppend(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	ctx := t.Context()
	const writers, batches, perBatch = 6, 40, 25
	for w := range writers {
		createT(t, s, newSession(fmt.Sprint("s", w), 1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			id := fmt.Sprint("s", w)
			for b := range batches {
				recs := make([]Record, 0, perBatch+2)
				for i := range perBatch {
					recs = append(recs, line(fmt.Sprint("a", i%3), fmt.Sprint(id, "/", b, "/", i), int64(b)))
				}
				recs = append(recs, Record{Counter: &Counter{Name: "batch", Value: int64(b + 1)}},
					Record{Task: &Task{ID: fmt.Sprint("t", b%5), Status: "running"}})
				if err := s.Append(ctx, id, recs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Sessions(ctx); err != nil {
					errs <- err
					return
				}
				if _, err := s.Load(ctx, "s0", Limits{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		id := fmt.Sprint("s", w)
		l := loadT(t, s, id, Limits{TranscriptPerAgent: 1 << 20})
		n := 0
		for _, lines := range l.Transcripts {
			for _, ln := range lines {
				if !strings.HasPrefix(ln.Text, id+"/") {
					t.Fatalf("session %s holds line %q", id, ln.Text)
				}
			}
			n += len(lines)
		}
		if n != batches*perBatch || l.Counters["batch"] != batches || len(l.Tasks) != 5 {
			t.Errorf("%s: %d lines, counter %d, %d tasks", id, n, l.Counters["batch"], len(l.Tasks))
		}
	}
}

// querySQL runs a read query in tests.
func querySQL(t testing.TB, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestWindowQueriesUseIndexes checks that every read whose cost must not
// grow with the history is an index range walk: no table scan, and no sort
// (a sort would read the whole range before LIMIT). The one exception is
// the recent agents: they are the session's agents (one per worker, found
// by index), sorted by activity; see migration 0003.
func TestWindowQueriesUseIndexes(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	for _, q := range []string{qConversationWindow, qHubWindow, qRecentAgents, qAgentChunks, qAgentWindow, qPrefix,
		`SELECT lines FROM transcript_agents WHERE aid = ?`} {
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q, 1, 1)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		sorted := strings.Contains(p, "TEMP B-TREE") && !(q == qRecentAgents && strings.Contains(p, "(sid=?)"))
		if !strings.Contains(p, "USING") || strings.Contains(p, "SCAN") || sorted {
			t.Errorf("%s\n  plan: %s", q, p)
		}
	}
}

// TestFailedBatchLeavesNothing fails a batch at its last record: nothing of
// it may be stored, and the agent it created must not stay cached.
func TestFailedBatchLeavesNothing(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "fleet.db"))
	ctx := t.Context()
	createT(t, s, newSession("s1", 1))
	appendT(t, s, "s1", line("old", "kept", 1))
	var recs []Record
	for i := range 100 { // more than one multi-row chunk
		recs = append(recs, line("new", fmt.Sprint("lost ", i), 2), line("old", "lost", 2))
	}
	recs = append(recs, Record{Conversation: &ConversationEntry{Role: "user", Text: "lost"}},
		Record{Task: &Task{ID: "t1", Status: "pending"}}, Record{Counter: &Counter{Name: "n", Value: 1}})
	boom := errors.New("boom")
	s.testHookRecord = func(i int) error {
		if i == len(recs)-1 {
			return boom
		}
		return nil
	}
	if err := s.Append(ctx, "s1", recs); !errors.Is(err, boom) {
		t.Fatalf("Append = %v, want boom", err)
	}
	s.testHookRecord = nil
	l := loadT(t, s, "s1", Limits{})
	if n, _ := s.TranscriptCount(ctx, "s1"); n != 1 || len(l.Transcripts) != 1 || l.ConversationTotal != 0 ||
		len(l.Conversation) != 0 || len(l.Tasks) != 0 || len(l.Counters) != 0 {
		t.Errorf("the failed batch left rows: %d lines, %+v", n, l)
	}
	appendT(t, s, "s1", line("new", "after", 3))
	l = loadT(t, s, "s1", Limits{})
	if got := l.Transcripts["new"]; len(got) != 1 || got[0].Text != "after" {
		t.Errorf("agent new after the failed batch: %+v", got)
	}
}

// TestConcurrentOpen opens one new file from several Stores at once, as
// fleets starting together would: each migration must run exactly once.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(path) })
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		createT(t, s, newSession(fmt.Sprint("s", i), 1))
		appendT(t, s, fmt.Sprint("s", i), line("w", "x", 1))
		defer s.Close()
	}
	if rows := querySQL(t, stores[0].r, `SELECT count(*) FROM schema_migrations`); rows != int64(SchemaVersion()) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, SchemaVersion())
	}
}
