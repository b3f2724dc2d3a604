package store

import (
	"context"
	"database/sql"
	"embed"

	"github.com/agents-fleet/fleet/internal/sqlmigrate"
)

// Migrations are the files migrations/NNNN_name.sql, numbered from 1 without
// gaps. They are append-only: a released migration is never edited, a change
// is a new file. Each one runs in its own transaction together with the
// schema_migrations row that records it (package sqlmigrate).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations is the embedded list, in order. A malformed list is a
// programmer error, caught by the package's tests.
var migrations = sqlmigrate.MustLoad(migrationFiles, "store")

// SchemaVersion is the schema version this binary writes: the number of the
// last embedded migration.
func SchemaVersion() int { return len(migrations) }

// migrate applies the pending migrations; a database newer than this
// binary is refused with ErrSchemaTooNew before anything is written.
func migrate(ctx context.Context, db *sql.DB) error {
	return sqlmigrate.Apply(ctx, db, migrations, ErrSchemaTooNew)
}
