package store

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/internal/sqlmigrate"
)

// TestAgentColumnsMigration opens a database as a binary that knew
// migrations 0001–0004 left it, with a task and a worker: migration 0005
// adds the agent columns with their defaults (a shell task's worker has no
// agent session and no tokens, a session no coordinator), and the new
// fields are written and read back afterwards.
func TestAgentColumnsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	oldDatabase(t, path, 4,
		`INSERT INTO tasks (sid, id, command, status, worker, reason, created_at, updated_at, attempts, loop_id, planned)
		VALUES (1, 't1', '$ make', 'done', 'w1', '', 2, 3, 1, '', 0)`,
		`INSERT INTO workers (sid, id, task_id, status, worktree_path, branch, base_commit, started_at, ended_at,
		last_activity_at, tool_uses) VALUES (1, 'w1', 't1', 'completed', '/wt', 'b', 'c', 2, 3, 3, 1)`)

	s := openT(t, path)
	if v := querySQL(t, s.r, `SELECT max(version) FROM schema_migrations`); v != int64(SchemaVersion()) || SchemaVersion() < 5 {
		t.Fatalf("schema version %d, binary %d", v, SchemaVersion())
	}
	l := loadT(t, s, "s1", Limits{})
	oldWorker := Worker{ID: "w1", TaskID: "t1", Status: "completed", WorktreePath: "/wt", Branch: "b", BaseCommit: "c",
		StartedAt: 2, EndedAt: 3, LastActivityAt: 3, ToolUses: 1}
	if !reflect.DeepEqual(l.Workers, []Worker{oldWorker}) || len(l.Tasks) != 1 || l.Tasks[0].Attempt != 1 {
		t.Fatalf("old rows after the migration: tasks %+v workers %+v", l.Tasks, l.Workers)
	}
	if l.Coordinator != (Coordinator{}) {
		t.Fatalf("coordinator of an old session: %+v", l.Coordinator)
	}

	agent := Worker{ID: "w2", TaskID: "t2", Status: "running", StartedAt: 4, Provider: "claude", Model: "opus",
		AgentSessionID: "5f1c", InputTokens: 100, OutputTokens: 20, CacheReadTokens: 7, CacheWriteTokens: 1,
		Prompt: "fix the build"}
	coord := Coordinator{Provider: "claude", Model: "opus", SessionID: "c0ffee"}
	appendT(t, s, "s1", Record{Worker: &agent}, Record{Coordinator: &coord})
	l = loadT(t, s, "s1", Limits{})
	if !reflect.DeepEqual(l.Workers, []Worker{oldWorker, agent}) || l.Coordinator != coord {
		t.Fatalf("after saving agent fields: workers %+v coordinator %+v", l.Workers, l.Coordinator)
	}
}

// TestWorkerHostMigration opens a database as migrations 0001–0005 left
// it, with a worker: migration 0006 gives it an empty host (the fleet's own
// machine), and a remote worker's host is written and read back.
func TestWorkerHostMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	oldDatabase(t, path, 5, `INSERT INTO workers (sid, id, task_id, status, worktree_path, branch, base_commit, started_at,
		ended_at, last_activity_at, tool_uses, provider, model) VALUES (1, 'w1', 't1', 'completed', '/wt', 'b', 'c', 2, 3, 3, 1, 'claude', 'opus')`)

	s := openT(t, path)
	if SchemaVersion() < 6 {
		t.Fatalf("schema version %d", SchemaVersion())
	}
	old := Worker{ID: "w1", TaskID: "t1", Status: "completed", WorktreePath: "/wt", Branch: "b", BaseCommit: "c",
		StartedAt: 2, EndedAt: 3, LastActivityAt: 3, ToolUses: 1, Provider: "claude", Model: "opus"}
	if l := loadT(t, s, "s1", Limits{}); !reflect.DeepEqual(l.Workers, []Worker{old}) {
		t.Fatalf("the old worker after the migration: %+v", l.Workers)
	}
	remote := Worker{ID: "w2", TaskID: "t2", Status: "running", StartedAt: 4, Provider: "claude", Host: "gpu-1"}
	appendT(t, s, "s1", Record{Worker: &remote})
	if l := loadT(t, s, "s1", Limits{}); !reflect.DeepEqual(l.Workers, []Worker{old, remote}) {
		t.Fatalf("after saving a remote worker: %+v", l.Workers)
	}
}

// oldDatabase makes the database at path as a binary that knew only the
// first n migrations left it: session s1 (sid 1), then the rows that
// inserts make.
func oldDatabase(t *testing.T, path string, n int, inserts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", sqlitefile.FileURI(path)+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlmigrate.Apply(t.Context(), db, migrations[:n], ErrSchemaTooNew); err != nil {
		t.Fatal(err)
	}
	sess := newSession("s1", 1)
	if _, err := db.Exec(`INSERT INTO sessions (id, name, cwd, provider, model, mode, repo_root, started_at, last_active)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, 1)`, sess.ID, sess.Name, sess.Cwd, sess.Provider, sess.Model, sess.Mode, sess.RepoRoot); err != nil {
		t.Fatal(err)
	}
	for _, q := range inserts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
