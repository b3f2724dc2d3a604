// Package intel is the fleet's intelligence store,
// <fleetHome>/intel/fleet-intel.db, shared by every session and repository:
// what agents ran and how it ended, the tools they used, the skills they
// followed, how operators steered them, and experiments. From it come the
// fleetIntel, fleetEvolution, fleetStore and fleetExperiment snapshots and
// the suggestions, by rules written down in docs/intel-store.md (and in
// rules.go). Everything in it was recorded from real fleets; nothing is
// made up. The values it records are package record's; the Service runs
// it for a fleet.
package intel

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/internal/sqlmigrate"
)

// Errors callers may branch on.
var (
	// ErrUnavailable: Open could not open the store (locked, corrupt,
	// too new, not writable, …). The error wrapping it names the path and
	// the cause; the fleet then runs without intel.
	ErrUnavailable = errors.New("intel unavailable")
	// ErrNotFound: no suggestion, shadow or experiment has that id.
	ErrNotFound = errors.New("not found")
	// errSchemaTooNew: the database was written by a newer fleet binary.
	errSchemaTooNew = errors.New("intel database schema is newer than this fleet binary")

	// errReadOnly is intel's wording of sqlitefile.ErrReadOnly.
	errReadOnly = fmt.Errorf("%w (is the file or its directory not writable?)", sqlitefile.ErrReadOnly)
)

const (
	// busyTimeout is how long a statement waits for another process's write
	// lock (every fleet on the machine shares the file) before SQLITE_BUSY.
	// Short, because nothing waits on intel: the Recorder retries, and a
	// snapshot is better late by 2 s than never.
	busyTimeout = 2 * time.Second
	// readConns caps the read pool (snapshots, listings).
	readConns = 4
)

// Migrations are migrations/NNNN_name.sql, numbered from 1 without gaps and
// append-only: a released file is never edited (package sqlmigrate).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = sqlmigrate.MustLoad(migrationFiles, "intel")

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) }

// Store is an open fleet-intel.db. It is safe for concurrent use: writes go
// through one connection (BEGIN IMMEDIATE), reads through a small pool of
// query-only connections, each snapshot in one read transaction (WAL readers
// see the last committed state and never wait for the writer).
type Store struct {
	path string
	w    *sql.DB // exactly one connection: every write
	r    *sql.DB // read pool, query_only
	st   stmts
	// now is the wall clock for the times the store assigns (skill
	// versions, shadows, evolutions); tests replace it.
	now func() time.Time
}

// DefaultPath is where a fleet keeps its intelligence store.
func DefaultPath(fleetHome string) string {
	return filepath.Join(fleetHome, "intel", "fleet-intel.db")
}

// Open opens or creates the store at path and brings its schema up to date:
// the directory is created 0700, a new file 0600 (SQLite gives the -wal and
// -shm files the database file's mode), WAL with synchronous=NORMAL,
// busy_timeout 2 s. Every failure wraps ErrUnavailable and names the path
// and the cause: a file that is not a SQLite database, a corrupt one, a
// schema newer than this binary, a file another process holds locked for
// longer than the busy timeout, a read-only file or directory. Open writes
// nothing to a file it rejects.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: open: empty path", ErrUnavailable)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, openError(abs, fmt.Errorf("create directory: %w", err))
	}
	if err := sqlitefile.PrepareFile(abs); err != nil {
		return nil, openError(abs, err)
	}
	uri := sqlitefile.FileURI(abs)
	ms := busyTimeout.Milliseconds()
	// mode=rw: never create the file behind our back (PrepareFile did, 0600).
	// _txlock=immediate: a write transaction takes the write lock at BEGIN,
	// where busy_timeout applies.
	w, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_txlock=immediate"+
		"&_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)", uri, ms))
	if err != nil {
		return nil, openError(abs, err)
	}
	sqlitefile.SingleConn(w)
	s := &Store{path: abs, w: w, now: time.Now}
	fail := func(err error) (*Store, error) {
		s.st.close()
		if s.r != nil {
			s.r.Close()
		}
		w.Close()
		return nil, openError(abs, err)
	}
	ctx := context.Background()
	if err := sqlitefile.CheckWritable(ctx, w); err != nil {
		if errors.Is(err, sqlitefile.ErrReadOnly) {
			err = errReadOnly
		}
		return fail(err)
	}
	// Migrations first: they refuse a newer schema (and fail on a corrupt
	// or locked file) before anything is written, the switch to WAL
	// included.
	if err := sqlmigrate.Apply(ctx, w, migrations, errSchemaTooNew); err != nil {
		return fail(err)
	}
	if err := sqlitefile.SetWAL(ctx, w, busyTimeout); err != nil {
		return fail(err)
	}
	if err := s.st.prepare(ctx, w); err != nil {
		return fail(err)
	}
	r, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=query_only(1)", uri, ms))
	if err != nil {
		return fail(err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	s.r = r
	if err := r.PingContext(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. Close every Recorder of the store first: a
// record written after Close is lost (and counted as dropped).
func (s *Store) Close() error {
	s.st.close()
	err := errors.Join(s.r.Close(), s.w.Close())
	if err != nil {
		return fmt.Errorf("close intel store %s: %w", s.path, err)
	}
	return nil
}

// isBusy reports whether err is a lock that passes (the Recorder waits).
func isBusy(err error) bool { return sqlitefile.IsBusy(err) }

// openError wraps err in ErrUnavailable with the path and, for failures an
// operator can fix, what is wrong in words.
func openError(path string, err error) error {
	if hint := fileHint(err); hint != "" {
		return fmt.Errorf("%w: open %s: %s: %w", ErrUnavailable, path, hint, err)
	}
	return fmt.Errorf("%w: open %s: %w", ErrUnavailable, path, err)
}

// fileHint describes a SQLite failure for an operator; "" when the error
// says it already.
func fileHint(err error) string {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return "the database or its directory is not writable"
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return "not a usable SQLite database (refusing to touch it)"
	case sqlite3.SQLITE_FULL:
		return "the disk is full"
	case sqlite3.SQLITE_IOERR:
		return "I/O error on the database file"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "another process holds the database locked"
	}
	return ""
}
