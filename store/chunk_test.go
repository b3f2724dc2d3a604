package store

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/protocol"
)

// agentLines loads every line of every agent of session id.
func agentLines(t testing.TB, s *Store, id string, perAgent int) map[string][]TranscriptLine {
	t.Helper()
	return loadT(t, s, id, Limits{TranscriptPerAgent: perAgent, TranscriptAgents: 1 << 20, Conversation: -1, Hub: -1}).Transcripts
}

// tail returns the last n of lines.
func tail(lines []TranscriptLine, n int) []TranscriptLine {
	return lines[max(0, len(lines)-n):]
}

// TestChunkRoundTrip writes lines whose every field is odd (invalid UTF-8,
// NUL bytes, empty and very long strings, unknown roles, extreme and
// decreasing timestamps) in batches of varying sizes, and checks every
// window size against what was written: windows that end inside a chunk,
// on a chunk boundary, and span many chunks.
//
// Through the transcript log, the twelve batches reach SQLite in one
// ingest, cut into chunks of about ingestChunkBytes.
func TestChunkRoundTrip(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testChunkRoundTrip(t, openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))) })
	t.Run("log", func(t *testing.T) { testChunkRoundTrip(t, openT(t, filepath.Join(t.TempDir(), "fleet.db"))) })
}

func testChunkRoundTrip(t *testing.T, s *Store) {
	createT(t, s, newSession("s1", 1))
	texts := append([]string{strings.Repeat("\xff", 70000), "\x00"}, weird...)
	roles := []protocol.Role{"tool", "", "assistant", "custom \xfe role", "system", "user"}
	streams := []protocol.Stream{"stdout", "stderr", "", "odd\x00stream"}
	tss := []int64{0, -1, math.MaxInt64, math.MinInt64, 1, time.Now().UnixMilli(), -1 << 40, 7}
	var want []TranscriptLine
	n := 0
	for batch := 1; batch <= 12; batch++ {
		var recs []Record
		for range batch {
			l := TranscriptLine{Agent: "w\xff", Role: roles[n%len(roles)], Stream: streams[n%len(streams)],
				Text: fmt.Sprint(n, texts[n%len(texts)]), Ts: tss[n%len(tss)]}
			if n%5 == 0 {
				l.Text = texts[n%len(texts)]
			}
			n++
			want = append(want, l)
			recs = append(recs, Record{Transcript: &l})
		}
		appendT(t, s, "s1", recs...)
	}
	if s.noLog {
		if c := querySQL(t, s.r, `SELECT count(*) FROM transcript_chunks`); c != 12 {
			t.Errorf("%d chunks, want one per batch (12)", c)
		}
	} else {
		agentLines(t, s, "s1", 1) // moves the log
		c := querySQL(t, s.r, `SELECT count(*) FROM transcript_chunks`)
		big := querySQL(t, s.r, `SELECT count(*) FROM transcript_chunks WHERE length(data) > ?`, ingestChunkBytes+len(want[0].Text)+64)
		if c < 2 || c >= 12 || big != 0 {
			t.Errorf("%d chunks (%d too large), want a few of at most ~%d bytes", c, big, ingestChunkBytes)
		}
	}
	for w := 1; w <= len(want)+2; w++ {
		got := agentLines(t, s, "s1", w)["w\xff"]
		if !reflect.DeepEqual(got, tail(want, w)) {
			t.Fatalf("window %d: got %d lines, want %d; first diff at %v", w, len(got), len(tail(want, w)), firstDiff(got, tail(want, w)))
		}
	}
	if c, err := s.TranscriptCount(t.Context(), "s1"); err != nil || c != int64(len(want)) {
		t.Errorf("TranscriptCount = %d, %v; want %d", c, err, len(want))
	}
	// first_line counts the agent's lines before the chunk.
	rows, err := s.r.Query(`SELECT first_line, lines FROM transcript_chunks ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	next := int64(0)
	for rows.Next() {
		var first, lines int64
		rows.Scan(&first, &lines)
		if first != next {
			t.Errorf("chunk first_line %d, want %d", first, next)
		}
		next += lines
	}
}

func firstDiff(a, b []TranscriptLine) string {
	for i := range min(len(a), len(b)) {
		if !reflect.DeepEqual(a[i], b[i]) {
			return fmt.Sprintf("%d: %+.80v vs %+.80v", i, a[i], b[i])
		}
	}
	return "length"
}

// TestChunkPerAgentPerBatch: a batch that interleaves agents stores one
// chunk per agent, and the agents' activity order is that of their last
// lines in the batch.
func TestChunkPerAgentPerBatch(t *testing.T) {
	s := openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	want := map[string][]TranscriptLine{}
	var recs []Record
	// Last lines: b at 9, a at 10, c at 11... written so that the agents'
	// first lines come in the opposite order.
	for i, agent := range []string{"c", "a", "b", "c", "a", "b", "c", "a", "b", "b", "a", "c"} {
		l := TranscriptLine{Agent: agent, Role: "tool", Text: fmt.Sprint(agent, i), Ts: int64(i)}
		want[agent] = append(want[agent], l)
		recs = append(recs, Record{Transcript: &l}, Record{Hub: &HubEvent{Text: fmt.Sprint(i)}})
	}
	appendT(t, s, "s1", recs...)
	if c := querySQL(t, s.r, `SELECT count(*) FROM transcript_chunks`); c != 3 {
		t.Errorf("%d chunks, want 3", c)
	}
	if got := agentLines(t, s, "s1", 100); !reflect.DeepEqual(got, want) {
		t.Errorf("lines %v, want %v", got, want)
	}
	for n, agents := range map[int]string{1: "c", 2: "a c", 3: "a b c"} {
		l := loadT(t, s, "s1", Limits{TranscriptAgents: n})
		var got []string
		for a := range l.Transcripts {
			got = append(got, a)
		}
		if fmt.Sprint(sorted(got)) != "["+agents+"]" {
			t.Errorf("%d most recent agents: %v, want %s", n, got, agents)
		}
	}
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestChunkManySmallChunks: a window spanning hundreds of chunks of one
// line (a quiet fleet: one line per transaction), with other agents'
// chunks in between.
func TestChunkManySmallChunks(t *testing.T) {
	s := openDirectT(t, filepath.Join(t.TempDir(), "fleet.db"))
	createT(t, s, newSession("s1", 1))
	var want []TranscriptLine
	for i := range 600 {
		l := TranscriptLine{Agent: "quiet", Role: "tool", Stream: "stdout", Text: fmt.Sprint("q", i), Ts: int64(i)}
		want = append(want, l)
		appendT(t, s, "s1", Record{Transcript: &l}, line("noisy", "n", 1), line("noisy", "n", 2))
	}
	for _, w := range []int{1, 2, 199, 200, 201, 599, 600, 601, 5000} {
		if got := agentLines(t, s, "s1", w)["quiet"]; !reflect.DeepEqual(got, tail(want, w)) {
			t.Errorf("window %d: %d lines, first diff %s", w, len(got), firstDiff(got, tail(want, w)))
		}
	}
	if n := len(agentLines(t, s, "s1", 5000)["noisy"]); n != 1200 {
		t.Errorf("noisy has %d lines, want 1200", n)
	}
}

// oldLayoutDB creates a database at path as a binary that knew only
// migration 0001 would have left it, with transcript lines in the old
// one-row-per-line table (written the way that binary's Append did).
func oldLayoutDB(t *testing.T, path string, sessions map[string][]TranscriptLine) {
	t.Helper()
	db, err := sql.Open("sqlite", sqlitefile.FileURI(path)+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) sql.Result {
		t.Helper()
		r, err := db.Exec(q, args...)
		if err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
		return r
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	exec(migrations[0].SQL)
	exec(`INSERT INTO schema_migrations VALUES (1, ?, 0)`, migrations[0].Name)
	for id, lines := range sessions {
		sess := newSession(id, 1)
		sid, _ := exec(`INSERT INTO sessions (id, name, cwd, provider, model, mode, repo_root, started_at, last_active)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, sess.ID, sess.Name, sess.Cwd, sess.Provider, sess.Model, sess.Mode,
			sess.RepoRoot, 1, 1).LastInsertId()
		for _, l := range lines {
			exec(`INSERT OR IGNORE INTO transcript_agents (sid, agent) VALUES (?, ?)`, sid, l.Agent)
			var aid int64
			if err := db.QueryRow(`SELECT aid FROM transcript_agents WHERE sid = ? AND agent = ?`, sid, l.Agent).Scan(&aid); err != nil {
				t.Fatal(err)
			}
			exec(`INSERT INTO transcript (aid, ts, role, stream, text) VALUES (?, ?, ?, ?, ?)`, aid, l.Ts, l.Role, l.Stream, l.Text)
			exec(`UPDATE transcript_agents SET last_seq = (SELECT max(seq) FROM transcript WHERE aid = ?1), lines = lines + 1 WHERE aid = ?1`, aid)
		}
	}
}

// TestOldLayoutRows opens a database written with migration 0001's layout
// (lines one row each in the transcript table): migration 0002 keeps those
// rows where they are, Load reads them, alone and in windows that continue
// into the chunks written afterwards, and the agents keep their activity
// order.
func TestOldLayoutRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	mk := func(agent string, i int) TranscriptLine {
		return TranscriptLine{Agent: agent, Role: "tool", Stream: "stdout", Text: fmt.Sprint(agent, i, " \xff"), Ts: int64(100 + i)}
	}
	want := map[string][]TranscriptLine{}
	var old []TranscriptLine
	// Activity order, newest first: c, a, b.
	for i := range 10 {
		if i < 5 {
			old = append(old, mk("b", i))
		}
		old = append(old, mk("a", i))
		if i >= 7 {
			old = append(old, mk("c", i-7))
		}
	}
	for _, l := range old {
		want[l.Agent] = append(want[l.Agent], l)
	}
	oldLayoutDB(t, path, map[string][]TranscriptLine{"s1": old, "s2": {mk("z", 0)}})

	s := openT(t, path)
	ctx := t.Context()
	if v := querySQL(t, s.r, `SELECT max(version) FROM schema_migrations`); v != int64(SchemaVersion()) {
		t.Fatalf("schema version %d", v)
	}
	if got := agentLines(t, s, "s1", 100); !reflect.DeepEqual(got, want) {
		t.Errorf("old lines:\n got %v\nwant %v", got, want)
	}
	if got := agentLines(t, s, "s1", 3)["a"]; !reflect.DeepEqual(got, tail(want["a"], 3)) {
		t.Errorf("old window: %v", got)
	}
	agentsOf := func(n int) string {
		var got []string
		for a := range loadT(t, s, "s1", Limits{TranscriptAgents: n}).Transcripts {
			got = append(got, a)
		}
		return strings.Join(sorted(got), " ")
	}
	if got := agentsOf(2); got != "a c" {
		t.Errorf("2 most recent old agents: %s, want a c", got)
	}
	if n, err := s.TranscriptCount(ctx, "s1"); err != nil || n != int64(len(old)) {
		t.Errorf("TranscriptCount = %d, %v", n, err)
	}

	// New lines for an old agent (b) and a new one (d): b's window now
	// spans its old rows and its chunks.
	var recs []Record
	for i, agent := range []string{"b", "d", "b"} {
		l := mk(agent, 5+i)
		want[agent] = append(want[agent], l)
		recs = append(recs, Record{Transcript: &l})
	}
	appendT(t, s, "s1", recs...)
	for i := range 3 {
		l := mk("b", 8+i)
		want["b"] = append(want["b"], l)
		appendT(t, s, "s1", Record{Transcript: &l})
	}
	if got := agentsOf(3); got != "b c d" {
		t.Errorf("3 most recent agents: %s, want b c d", got)
	}
	if got := agentsOf(4); got != "a b c d" {
		t.Errorf("4 most recent agents: %s", got)
	}
	for w := 1; w <= len(want["b"])+1; w++ {
		if got := agentLines(t, s, "s1", w)["b"]; !reflect.DeepEqual(got, tail(want["b"], w)) {
			t.Errorf("b, window %d:\n got %v\nwant %v", w, got, tail(want["b"], w))
		}
	}
	if got := agentLines(t, s, "s1", 100); !reflect.DeepEqual(got, want) {
		t.Errorf("all lines:\n got %v\nwant %v", got, want)
	}
	if first := querySQL(t, s.r, `SELECT min(first_line) FROM transcript_chunks c JOIN transcript_agents a USING (aid)
		WHERE a.agent = 'b'`); first != 5 {
		t.Errorf("b's first chunk starts at line %d, want 5 (after its 5 old rows)", first)
	}
	if n, err := s.TranscriptCount(ctx, "s1"); err != nil || n != int64(len(old)+6) {
		t.Errorf("TranscriptCount = %d, %v", n, err)
	}
	if got := agentLines(t, s, "s2", 10)["z"]; len(got) != 1 || got[0] != mk("z", 0) {
		t.Errorf("other old session: %v", got)
	}
}

// TestDecodeChunkCorrupt: a damaged chunk is an error, never a panic or a
// wrong line.
func TestDecodeChunkCorrupt(t *testing.T) {
	var buf []byte
	buf = append(buf, chunkFormat)
	prev := int64(0)
	for i := range 3 {
		l := TranscriptLine{Role: "tool", Stream: "stdout", Text: strings.Repeat("x", 200*i), Ts: int64(i) << 50}
		buf = appendChunkLine(buf, prev, &l)
		prev = l.Ts
	}
	dst := make([]TranscriptLine, 3)
	if err := decodeChunkTail(buf, 3, "a", dst); err != nil {
		t.Fatalf("intact chunk: %v", err)
	}
	for cut := range len(buf) {
		for k := 1; k <= 3; k++ {
			if err := decodeChunkTail(buf[:cut], 3, "a", make([]TranscriptLine, k)); err == nil {
				t.Fatalf("chunk cut at %d, tail %d: no error", cut, k)
			}
		}
	}
	if err := decodeChunkTail(append(buf, 0), 3, "a", dst); err == nil {
		t.Error("trailing byte: no error")
	}
	if err := decodeChunkTail(buf, 2, "a", make([]TranscriptLine, 3)); err == nil {
		t.Error("more lines wanted than the chunk has: no error")
	}
	bad := append([]byte{chunkFormat}, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	if err := decodeChunkTail(bad, 1, "a", make([]TranscriptLine, 1)); err == nil {
		t.Error("huge length: no error")
	}
}
