// Package sqlmigrate applies the numbered, embedded schema migrations of the
// project's SQLite databases (the session store and the native roots): files
// migrations/NNNN_description.sql, numbered from 1 without gaps, each run
// in its own transaction with the schema_migrations row that records it.
package sqlmigrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// Migration is one migration file.
type Migration struct {
	Version int
	Name    string // the file name without .sql
	SQL     string
}

// MustLoad is Load for a package's embedded list, read at start: a
// malformed list is a programmer error (each package's tests load it), so
// it panics, naming owner.
func MustLoad(fsys fs.FS, owner string) []Migration {
	ms, err := Load(fsys)
	if err != nil {
		panic(owner + ": " + err.Error())
	}
	return ms
}

// Load reads migrations/*.sql from fsys, in order, and checks the numbering.
func Load(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	// fs.Glob returns names sorted, so zero-padded numbers come in order.
	var ms []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", base)
		}
		if v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: expected number %d", base, len(ms)+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(base, ".sql"), SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations embedded")
	}
	return ms, nil
}

// Apply applies the pending migrations of ms. When db's transactions begin
// IMMEDIATE, two processes opening the same file at once apply each
// migration exactly once: the second re-reads the version under the write
// lock and finds nothing to do. A database newer than ms is refused, with
// an error wrapping tooNew, before anything is written to it.
func Apply(ctx context.Context, db *sql.DB, ms []Migration, tooNew error) error {
	for {
		done, err := step(ctx, db, ms, tooNew)
		if err != nil || done {
			return err
		}
	}
}

// step applies the next pending migration, or reports that none is left.
func step(ctx context.Context, db *sql.DB, ms []Migration, tooNew error) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || done {
			tx.Rollback()
		}
	}()
	var exists int
	err = tx.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists)
	if err != nil {
		return false, err
	}
	cur := 0
	if exists > 0 {
		if err = tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
			return false, err
		}
	}
	switch {
	case cur > len(ms):
		return false, fmt.Errorf("%w (schema version %d, this binary knows up to %d): upgrade fleet to open it", tooNew, cur, len(ms))
	case cur == len(ms):
		return true, nil
	}
	if exists == 0 {
		_, err = tx.ExecContext(ctx, `CREATE TABLE schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`)
		if err != nil {
			return false, fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	m := ms[cur]
	if _, err = tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if err = tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	return false, nil
}
