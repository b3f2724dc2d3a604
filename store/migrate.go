package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// Migrations are the files migrations/NNNN_name.sql, numbered from 1 without
// gaps. They are append-only: a released migration is never edited, a change
// is a new file. Each one runs in its own transaction together with the
// schema_migrations row that records it.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the embedded list, in order. A malformed list is a
// programmer error, caught by the package's tests.
var migrations = mustLoadMigrations(migrationFiles)

func mustLoadMigrations(fsys fs.FS) []migration {
	ms, err := loadMigrations(fsys)
	if err != nil {
		panic("store: " + err.Error())
	}
	return ms
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	// fs.Glob returns names sorted, so zero-padded numbers come in order.
	var ms []migration
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
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations embedded")
	}
	return ms, nil
}

// SchemaVersion is the schema version this binary writes: the number of the
// last embedded migration.
func SchemaVersion() int { return len(migrations) }

// migrate applies the pending migrations, each in one transaction. db's
// transactions begin IMMEDIATE, so two processes opening the same file at
// once apply each migration exactly once: the second re-reads the version
// under the write lock and finds nothing to do.
func migrate(ctx context.Context, db *sql.DB) error {
	for {
		done, err := migrateStep(ctx, db)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the next pending migration, or reports that none is
// left. A database newer than this binary is refused before anything is
// written.
func migrateStep(ctx context.Context, db *sql.DB) (done bool, err error) {
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
		err = tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&cur)
		if err != nil {
			return false, err
		}
	}
	switch {
	case cur > len(migrations):
		return false, fmt.Errorf("%w (schema version %d, this binary knows up to %d): upgrade fleet to open it", ErrSchemaTooNew, cur, len(migrations))
	case cur == len(migrations):
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
	m := migrations[cur]
	if _, err = tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if err = tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	return false, nil
}
