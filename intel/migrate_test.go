package intel

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/internal/sqlmigrate"
)

// TestRunHostMigration opens a store as a binary that knew only migration
// 0001 left it, with a run: migration 0002 gives that run an empty host, and a
// run recorded afterwards keeps the worker host it ran on.
func TestRunHostMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet-intel.db")
	db, err := sql.Open("sqlite", sqlitefile.FileURI(path)+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlmigrate.Apply(t.Context(), db, migrations[:1], errSchemaTooNew); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sessions (id, started_at) VALUES ('s1', 1)`,
		`INSERT INTO runs (id, sid, worker, task_id, provider, model, task, kind, skill, skill_version, shadow, repo,
			worktree, started_at, ended_at, at, outcome, exit_code, error, cause, class, error_key, ok, judged,
			input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
			VALUES ('s1/w1/t1', 1, 'w1', 't1', 'local', '', 'make', 'make', '', 0, '', '/repo', '', 1, 2, 2,
			'completed', 0, '', '', '', '', 1, 1, 0, 0, 0, 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openAt(t, path)
	remote := okRun("s1", "claude", "train it", hour)
	remote.ID, remote.Host = "s1/w2/t2", "gpu-1"
	write(t, s, remote)
	for id, want := range map[string]string{"s1/w1/t1": "", "s1/w2/t2": "gpu-1"} {
		var host string
		if err := s.r.QueryRow(`SELECT host FROM runs WHERE id = ?`, id).Scan(&host); err != nil {
			t.Fatal(err)
		}
		if host != want {
			t.Errorf("run %s: host %q, want %q", id, host, want)
		}
	}
}
