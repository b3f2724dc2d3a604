// Package native keeps a native session's roots (DESIGN §7): the durable
// policy scopes operators steer with nativeRoot requests and the engine reads
// before it starts work.
//
// Durability: native.db runs in WAL mode with synchronous=FULL, so every
// committed transaction is fsync'd before a mutation is answered. All writes
// go through one writer goroutine that group-commits: it takes every job
// queued while the previous transaction committed and applies them, in
// order, in one transaction (each job in its own savepoint, seeing the state
// the previous jobs left), then commits once and answers each job.
package native

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/internal/sqlmigrate"
	_ "modernc.org/sqlite" // driver "sqlite"
)

// Errors callers may branch on.
var (
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("native store is closed")
	// ErrSchemaTooNew: native.db was written by a newer fleet binary.
	ErrSchemaTooNew = errors.New("native database schema is newer than this fleet binary")
	// ErrUnknownTask: the engine named a task no root of the session holds.
	ErrUnknownTask = errors.New("unknown task")
	// ErrUnknownRoot: the engine named a root the session does not own.
	ErrUnknownRoot = errors.New("unknown root")
)

const (
	busyTimeout = 10 * time.Second
	readConns   = 4
	// maxBatch caps the jobs one transaction takes, so one commit never
	// holds a long queue's answers back behind a huge transaction.
	maxBatch = 512
)

// Store is an open native.db. It is safe for concurrent use.
type Store struct {
	path string
	w    *sql.DB // one connection, used only by the writer goroutine
	r    *sql.DB // read pool, query_only

	// mu guards closed and the send on jobs (read-locked by senders, so
	// Close never closes jobs under a sender).
	mu     sync.RWMutex
	closed bool
	jobs   chan *job
	done   chan struct{} // closed when the writer goroutine returned
}

// job is one unit of work for the writer: fn runs inside the batch's
// transaction, in its own savepoint; after runs on the writer goroutine
// once the batch committed, when fn succeeded.
type job struct {
	fn    func(tx *sql.Tx) (any, error)
	after func(v any)
	res   chan jobResult
}

type jobResult struct {
	v   any
	err error
}

// Open opens or creates the database at path (normally
// <fleetHome>/state/native.db), its directory 0700 and the file 0600, and
// brings the schema up to date.
func Open(p string) (*Store, error) {
	if p == "" {
		return nil, errors.New("open native store: empty path")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("open native store %s: %w", p, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open native store %s: create directory: %w", abs, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, err
	}
	uri := sqlitefile.FileURI(abs)
	ms := busyTimeout.Milliseconds()
	w, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_txlock=immediate"+
		"&_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)", uri, ms))
	if err != nil {
		return nil, fmt.Errorf("open native store %s: %w", abs, err)
	}
	sqlitefile.SingleConn(w)
	ctx := context.Background()
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open native store %s: %w", abs, err)
	}
	var mode string
	if err := w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		w.Close()
		return nil, fmt.Errorf("open native store %s: WAL mode could not be set (%q, %v)", abs, mode, err)
	}
	r, err := sql.Open("sqlite", fmt.Sprintf("%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=query_only(1)", uri, ms))
	if err == nil {
		r.SetMaxOpenConns(readConns)
		r.SetMaxIdleConns(readConns)
		if err = r.PingContext(ctx); err != nil {
			r.Close()
		}
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open native store %s: %w", abs, err)
	}
	s := &Store{path: abs, w: w, r: r, jobs: make(chan *job, maxBatch), done: make(chan struct{})}
	go s.writer()
	return s, nil
}

// Path returns the database file's absolute path.
func (s *Store) Path() string { return s.path }

// Close stops the writer after it answered every queued job, then closes
// the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.jobs)
	s.mu.Unlock()
	<-s.done
	err := s.r.Close()
	if werr := s.w.Close(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("close native store %s: %w", s.path, err)
	}
	return nil
}

// do queues fn for the writer and waits for its answer, which comes only
// after the batch's commit (or its failure). Once queued, the job is not
// abandoned when ctx ends: its answer says whether it committed.
func (s *Store) do(ctx context.Context, fn func(tx *sql.Tx) (any, error), after func(any)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := &job{fn: fn, after: after, res: make(chan jobResult, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	s.jobs <- j
	s.mu.RUnlock()
	r := <-j.res
	return r.v, r.err
}

// writer is the only goroutine that writes. Each round takes the jobs
// queued so far (up to maxBatch), runs them in one transaction and commits.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]*job, 0, maxBatch)
	for j := range s.jobs {
		batch = append(batch[:0], j)
	fill:
		for len(batch) < maxBatch {
			select {
			case j, ok := <-s.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		s.runBatch(batch)
	}
}

// errInternal is what a job sees when its batch could not commit.
var errInternal = errors.New("native store: transaction failed")

func (s *Store) runBatch(batch []*job) {
	ctx := context.Background()
	results := make([]jobResult, len(batch))
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		for _, j := range batch {
			j.res <- jobResult{err: fmt.Errorf("%w: %v", errInternal, err)}
		}
		return
	}
	for i, j := range batch {
		results[i] = runJob(ctx, tx, j)
	}
	if err := tx.Commit(); err != nil {
		for _, j := range batch {
			j.res <- jobResult{err: fmt.Errorf("%w: %v", errInternal, err)}
		}
		return
	}
	for i, j := range batch {
		if results[i].err == nil && j.after != nil {
			j.after(results[i].v)
		}
		j.res <- results[i]
	}
}

// runJob runs j.fn in a savepoint, rolled back when fn fails, so a refused
// or broken job leaves nothing behind in the batch's transaction.
func runJob(ctx context.Context, tx *sql.Tx, j *job) jobResult {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT job`); err != nil {
		return jobResult{err: err}
	}
	v, err := j.fn(tx)
	if err != nil {
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO job`); rerr != nil {
			return jobResult{err: rerr}
		}
	}
	if _, rerr := tx.ExecContext(ctx, `RELEASE job`); rerr != nil && err == nil {
		err = rerr
	}
	return jobResult{v: v, err: err}
}

// prepareFile creates a missing database file 0600 and refuses a file that
// is not a SQLite database before SQLite touches it (sqlitefile.PrepareFile,
// in native's words).
func prepareFile(p string) error {
	err := sqlitefile.PrepareFile(p)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sqlitefile.ErrNotRegular), errors.Is(err, sqlitefile.ErrNotDatabase):
		return fmt.Errorf("open native store %s: not a SQLite database (refusing to touch it)", p)
	}
	return fmt.Errorf("open native store %s: %w", p, err)
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = sqlmigrate.MustLoad(migrationFiles, "native")

// migrate applies the pending migrations (package sqlmigrate); a database
// newer than this binary is refused with ErrSchemaTooNew.
func migrate(ctx context.Context, db *sql.DB) error {
	return sqlmigrate.Apply(ctx, db, migrations, ErrSchemaTooNew)
}
