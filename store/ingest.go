package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// ingestLimits pace the moving of transcript logs into SQLite (tlog.go): a
// round runs once output has paused for idle, at most maxAge after the
// first line since the last round, or as soon as bytes are waiting.
type ingestLimits struct {
	idle, maxAge time.Duration
	bytes        int64
}

// ingestDefaults are the ingester's limits (tests shrink them). A 200,000
// line burst of 200-byte lines is ~42 MB of log: it is moved after the
// burst, not during it.
var ingestDefaults = ingestLimits{idle: 100 * time.Millisecond, maxAge: 5 * time.Second, bytes: 64 << 20}

// ingester is the Store's goroutine that moves its transcript logs into
// SQLite.
type ingester struct {
	s       *Store
	lim     ingestLimits
	pace    pacer
	pending atomic.Int64 // log bytes written since the last round
	stop    chan struct{}
	done    chan struct{}

	// runs and fails count rounds; lastErr is the last failure (a failed
	// round leaves the lines in the log for the next one). For tests and
	// diagnostics.
	runs, fails atomic.Int64
	lastErr     atomic.Pointer[error]
}

func newIngester(s *Store) *ingester {
	in := &ingester{s: s, lim: ingestDefaults, pace: newPacer(ingestDefaults.idle, ingestDefaults.maxAge),
		stop: make(chan struct{}), done: make(chan struct{})}
	go in.run()
	return in
}

// wrote tells the ingester that n bytes were appended to a log. It never
// blocks.
func (in *ingester) wrote(n int64) {
	in.pace.wrote()
	if in.pending.Add(n) >= in.lim.bytes {
		in.pace.full()
	}
}

func (in *ingester) run() {
	defer close(in.done)
	for in.pace.wait(in.stop) {
		in.pending.Store(0)
		in.pace.started()
		in.runs.Add(1)
		if err := in.s.ingestAll(); err != nil {
			in.fails.Add(1)
			in.lastErr.Store(&err)
		}
	}
}

// ingestAll moves every log this Store holds into SQLite.
func (s *Store) ingestAll() error {
	s.lmu.Lock()
	logs := make([]*tlog, 0, len(s.logs))
	for _, l := range s.logs {
		logs = append(logs, l)
	}
	s.lmu.Unlock()
	var errs []error
	for _, l := range logs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
		errs = append(errs, s.flush(ctx, l))
		cancel()
	}
	return errors.Join(errs...)
}

// closeLogs stops the ingester, moves every log into SQLite, deletes the
// files and releases the locks. A log that cannot be moved stays on disk
// for the session's next owner.
func (s *Store) closeLogs() error {
	close(s.ing.stop)
	<-s.ing.done
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.logsClosed = true
	var errs []error
	for id, l := range s.logs {
		l.imu.Lock()
		l.mu.Lock()
		l.closed = true
		l.f.Close()
		l.f = nil
		if l.size == int64(len(tlogMagic)) {
			os.Remove(l.path(l.gen)) // nothing in it
		} else {
			l.closes = append(l.closes, l.gen)
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*busyTimeout)
		if _, err := s.ingestClosed(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", id, err))
		}
		cancel()
		l.imu.Unlock()
		l.lock.Release()
	}
	clear(s.logs)
	return errors.Join(errs...)
}
