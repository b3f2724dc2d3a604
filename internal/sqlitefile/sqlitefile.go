// Package sqlitefile holds what the project's SQLite databases (the session
// store, the intel store and the native roots; modernc.org/sqlite) do the
// same way around opening their file: create it 0600 and refuse a file that
// is not a SQLite database before SQLite touches it (PrepareFile), name it
// by a URI that survives any path (FileURI), keep a writer to one
// connection (SingleConn), notice a silent read-only open (CheckWritable),
// switch to WAL despite concurrent openers (SetWAL), and tell a lock that
// will pass (IsBusy).
//
// Errors are returned bare, without the path: each package words its own
// "open … <path>: …" message around them.
package sqlitefile

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Header starts every SQLite database file.
const Header = "SQLite format 3\x00"

// Errors of PrepareFile and CheckWritable.
var (
	// ErrNotRegular: the path names a directory, a device, a pipe, ….
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDatabase: the file does not start with Header (a file shorter
	// than Header included).
	ErrNotDatabase = errors.New("not a SQLite database (refusing to touch it)")
	// ErrReadOnly: SQLite opened the database read-only.
	ErrReadOnly = errors.New("SQLite could only open it read-only")
)

// PrepareFile creates a missing database file with mode 0600 (SQLite gives
// the -wal and -shm files the database file's mode), and refuses an existing
// file that is not a SQLite database (ErrNotRegular, ErrNotDatabase) before
// SQLite touches it. An empty file is accepted: SQLite
// treats it as a new database. Other failures are the os package's errors.
func PrepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err = os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return ErrNotRegular
	}
	var hdr [len(Header)]byte
	n, err := io.ReadFull(f, hdr[:])
	if n == 0 && (err == io.EOF || err == nil) {
		return nil // empty: a database nobody has written yet
	}
	if n < len(Header) || !bytes.Equal(hdr[:], []byte(Header)) {
		return ErrNotDatabase // short, unreadable or another format
	}
	return nil
}

// FileURI turns an absolute path into a SQLite URI filename, escaping the
// characters ('?', '#', '%', …) that would otherwise end or alter the path.
func FileURI(abs string) string {
	p := filepath.ToSlash(abs)
	if p == "" || p[0] != '/' {
		p = "/" + p // Windows: file:///C:/…
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// SingleConn limits db's pool to one connection, kept open for good (never
// closed for its age or for idleness): the one writer, through which every
// write goes, or a connection whose pragmas must hold across calls.
func SingleConn(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// CheckWritable fails with ErrReadOnly when SQLite fell back to opening the
// main database of db read-only (it does so silently when the file is not
// writable), so that a caller can stop before any migration could half-run.
func CheckWritable(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var ro bool
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(interface{ IsReadOnly(string) (bool, error) })
		if !ok {
			return nil
		}
		var err error
		ro, err = c.IsReadOnly("main")
		return err
	})
	if err != nil {
		return err
	}
	if ro {
		return ErrReadOnly
	}
	return nil
}

// SetWAL switches the database to WAL mode (persistent: a no-op once done).
// The switch needs an exclusive lock and SQLite does not run the busy
// handler for it, so when several processes open a new file at once the
// losers retry here, while IsBusy, for up to timeout.
func SetWAL(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode)
		if err != nil && IsBusy(err) && time.Now().Before(deadline) {
			time.Sleep(wait)
			continue
		}
		if err != nil {
			return err
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("journal_mode is %q, WAL could not be set", mode)
		}
		return nil
	}
}

// IsBusy reports whether err is SQLite's "another connection holds the
// lock" (SQLITE_BUSY or SQLITE_LOCKED, extended codes included), which
// passes.
func IsBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// Querier is what Each queries: a *sql.DB, *sql.Tx or *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Each runs query and calls fn for each row, closing the rows however it
// ends.
func Each(ctx context.Context, q Querier, fn func(*sql.Rows) error, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
