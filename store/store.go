// Package store persists fleet sessions in SQLite (modernc.org/sqlite, no
// cgo) so that they can be listed and resumed after a crash or a restart.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL, so a
// transaction that Append (or CreateSession) committed survives a crash or a
// kill -9 of the process; only a power loss or an OS crash can drop the last
// transactions before a checkpoint. Transcript lines are written to a
// per-session append-only log first, which survives the same faults, and
// moved into the database when output pauses (tlog.go). See docs/store.md.
//
// A Store is safe for concurrent use. Writes go through one connection, in
// one transaction per call; reads use a small pool of their own, so a Load or
// a Sessions listing never waits behind a batch (WAL readers see the last
// committed state).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
)

// Errors callers may branch on. Every other error wraps the SQLite error and
// names the database path when it concerns the file.
var (
	// ErrNotFound: no session has that id or id prefix.
	ErrNotFound = errors.New("session not found")
	// ErrAmbiguous: an id prefix matches more than one session.
	ErrAmbiguous = errors.New("session id prefix is ambiguous")
	// ErrExists: CreateSession with an id that is already taken.
	ErrExists = errors.New("session already exists")
	// ErrSchemaTooNew: the database was written by a newer fleet binary.
	ErrSchemaTooNew = errors.New("database schema is newer than this fleet binary")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store is closed")
)

const (
	// busyTimeout is how long a statement waits for another process's write
	// lock (several fleets share one fleet.db) before failing with SQLITE_BUSY.
	busyTimeout = 10 * time.Second
	// readConns caps the read pool. Reads are short (Load is bounded by
	// Limits), so a few connections serve a daemon and its CLI callers.
	readConns = 4
)

// Store is an open fleet.db.
type Store struct {
	path string
	w    *sql.DB // exactly one connection: all writes, BEGIN IMMEDIATE
	r    *sql.DB // read pool, query_only
	ck   *checkpointer
	// ckOnce stops ck, outside wmu (ck's catch-up pass takes wmu).
	ckOnce sync.Once
	ckErr  error

	// rclosed is set by Close, for readers (which do not take wmu).
	rclosed atomic.Bool

	// wmu serialises writers in this process and guards the fields below it.
	// It is held for a whole Append, so the caches only ever see committed
	// rows.
	wmu    sync.Mutex
	closed bool
	stmts  stmts
	// sids caches session id → sid (sessions are never deleted).
	sids map[string]int64
	// aids caches (sid, agent) → aid of transcript_agents (never deleted).
	aids map[agentKey]int64
	// activeAt is the last_active each session's row holds, as Append
	// last wrote it (see touchEvery).
	activeAt map[int64]int64
	// scratch is reused by Append.
	scratch batch
	// now returns the wall clock in epoch ms; tests replace it.
	now func() int64
	// testHookRecord, when set, runs before Append writes record i; an
	// error fails the batch there (tests of the rollback path).
	testHookRecord func(i int) error

	// Transcript logs (tlog.go). lmu guards logs, and is taken before a
	// log's mutexes and before wmu.
	lmu sync.Mutex
	// logs holds the sessions' logs this Store writes, by session id;
	// logMissed, when it last failed to take one (then Append saves the
	// session's lines straight to SQLite).
	logs       map[string]*tlog
	logMissed  map[string]time.Time
	logsClosed bool // Close has moved the logs: no more are taken
	// noLog: never use a transcript log (tests of the direct path).
	noLog bool
	// ing moves the logs into SQLite; ingOnce stops it, before ck.
	ing     *ingester
	ingOnce sync.Once
	ingErr  error
}

// Open opens or creates the database at path and brings its schema up to
// date. The parent directory is created 0700 and a new file 0600 (SQLite
// gives the -wal and -shm files the database file's mode). A file that is not
// a SQLite database, a schema newer than this binary knows (ErrSchemaTooNew),
// a read-only file or directory, or a full disk fail with an error that names
// the path, and Open writes nothing to a file it rejects.
func Open(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: create directory: %w", abs, err)
	}
	if err := sqlitefile.PrepareFile(abs); err != nil {
		return nil, openError(abs, err)
	}

	uri := sqlitefile.FileURI(abs)
	ms := busyTimeout.Milliseconds()
	// mode=rw: never create the file behind our back (PrepareFile did, with
	// 0600). _txlock=immediate: a write transaction takes the write lock at
	// BEGIN, so busy_timeout applies and a read-only database fails there.
	// journal_mode is set by SetWAL below, not here. wal_autocheckpoint=0:
	// commits never checkpoint, the checkpointer goroutine does.
	w, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_txlock=immediate"+
		"&_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"+
		"&_pragma=wal_autocheckpoint(0)", uri, ms))
	if err != nil {
		return nil, openError(abs, err)
	}
	sqlitefile.SingleConn(w)

	s := &Store{
		path:      abs,
		w:         w,
		sids:      make(map[string]int64),
		aids:      make(map[agentKey]int64),
		activeAt:  make(map[int64]int64),
		logs:      make(map[string]*tlog),
		logMissed: make(map[string]time.Time),
		now:       func() int64 { return time.Now().UnixMilli() },
	}
	ctx := context.Background()
	if err := sqlitefile.CheckWritable(ctx, w); err != nil {
		w.Close()
		return nil, openError(abs, err)
	}
	// Migrations first: they refuse a newer schema before anything is
	// written, the switch to WAL included.
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, openError(abs, err)
	}
	if err := sqlitefile.SetWAL(ctx, w, busyTimeout); err != nil {
		w.Close()
		return nil, openError(abs, err)
	}
	if err := s.stmts.prepare(ctx, w); err != nil {
		s.stmts.close()
		w.Close()
		return nil, openError(abs, err)
	}
	// The read pool is opened after the migrations, so it never sees an old
	// schema.
	r, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=query_only(1)", uri, ms))
	if err == nil {
		r.SetMaxOpenConns(readConns)
		r.SetMaxIdleConns(readConns)
		err = r.PingContext(ctx)
		if err != nil {
			r.Close()
		}
	}
	if err != nil {
		s.stmts.close()
		w.Close()
		return nil, openError(abs, err)
	}
	s.r = r
	// The checkpointer's connection: like the writer's, synchronous=NORMAL
	// (a checkpoint fsyncs the WAL before it copies it, and the database
	// after).
	ck, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)"+
		"&_pragma=wal_autocheckpoint(0)", uri, ms))
	if err == nil {
		sqlitefile.SingleConn(ck)
		err = ck.PingContext(ctx)
		if err != nil {
			ck.Close()
		}
	}
	if err != nil {
		s.stmts.close()
		r.Close()
		w.Close()
		return nil, openError(abs, err)
	}
	s.ck = newCheckpointer(ck, &s.wmu)
	s.ing = newIngester(s)
	return s, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close moves the transcript logs into the database and deletes them, stops
// the checkpointer and closes the database. The last connection to close
// checkpoints the WAL into the database file and removes the -wal and -shm
// files.
func (s *Store) Close() error {
	s.ingOnce.Do(func() { s.ingErr = s.closeLogs() })
	s.ckOnce.Do(func() { s.ckErr = s.ck.close() })
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.rclosed.Store(true)
	err := errors.Join(s.ingErr, s.ckErr)
	s.stmts.close()
	if rerr := s.r.Close(); err == nil {
		err = rerr
	}
	if werr := s.w.Close(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// openError wraps err with the path and, for the failures an operator can
// fix, says what is wrong in words.
func openError(path string, err error) error {
	if hint := fileHint(path, err); hint != "" {
		return fmt.Errorf("open store %s: %s: %w", path, hint, err)
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// fileHint describes, for an operator, a failure that comes from the
// database file or the disk rather than from the caller; "" otherwise.
func fileHint(path string, err error) string {
	var se *sqlite.Error
	switch {
	case errors.Is(err, ErrSchemaTooNew):
		return "" // the error says it all
	case errors.Is(err, sqlitefile.ErrReadOnly), errors.Is(err, fs.ErrPermission):
		return readOnlyHint(path)
	case spaceHint(err) != "":
		return spaceHint(err)
	case errors.As(err, &se):
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return readOnlyHint(path)
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return "not a usable SQLite database (refusing to touch it)"
		case sqlite3.SQLITE_FULL:
			return "the disk is full"
		case sqlite3.SQLITE_IOERR:
			return "I/O error on the database file (is the disk full?)"
		case sqlite3.SQLITE_BUSY:
			return "another process holds the database locked"
		}
	}
	return ""
}

// readOnlyHint says which of the file and its directory (where SQLite must
// create the -wal and -shm files) is not writable, when it can tell.
func readOnlyHint(path string) string {
	dir := filepath.Dir(path)
	_, err := os.Stat(path)
	switch {
	case err == nil && !writable(path):
		return "the database file is not writable"
	case !writable(dir):
		return "directory " + dir + " is not writable (SQLite needs it for the -wal and -shm files)"
	}
	return "the database or its directory is not writable"
}
