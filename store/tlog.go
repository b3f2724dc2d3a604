package store

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/internal/lockfile"
)

// Transcript logs (docs/store.md, Transcript logs). Saving a small batch of
// transcript lines as a SQLite commit rewrites a few 4 KiB pages and takes
// ~100 µs of system calls, which was a third of a busy fleet's CPU and most
// of its latency. So Append writes a batch's transcript lines to an
// append-only file of the session with one write(2), which survives a kill
// -9 as a commit does, and the Store moves the lines into transcript_chunks
// later (ingest), many batches per transaction, when output pauses.
//
// The files live in <db>-transcripts/: <sid>.<gen>.log are the generations
// of session sid's log, <sid>.lock is flocked by the one Store that writes
// the session's log. Append only writes the newest generation; an ingest
// first starts a new one, then moves the closed ones into SQLite and
// deletes them. The transcript_logs row of the session (migration 0004)
// says how far the move got, and is updated in the transaction that inserts
// the chunks, so a line is moved exactly once even if the process dies half
// way; a Store that takes over the session later (a resume) moves what is
// left before it reads or writes.
//
// A generation file is tlogMagic followed by records:
//
//	record = body length (uint32 LE), CRC-32C of body (uint32 LE), body
//	body   = flags (1 byte), line count (uvarint), then per line the agent
//	         (uvarint length and bytes) and the line in chunk encoding with
//	         an absolute ts (chunk.go: appendChunkLine with prevTs 0)
//
// A record that is cut short or fails its checksum ends the generation:
// the process died inside the write, so its batch was never acknowledged,
// or a power cut lost the file's end, as it can lose the last commits of an
// unsynced WAL (docs/store.md, Durability). Flag tlogBatch marks the record of a batch
// that also commits rows to SQLite, after the record is written: it counts
// only if that commit happened (migration 0004, batch_gen and batch_off).
const tlogMagic = "FLTLOG1\n"

// tlogBatch flags a record whose batch has other records (see above).
const tlogBatch = 1

const (
	// maxTlogRecord bounds one record's body. A batch with more transcript
	// text than this is saved straight to SQLite instead (journal batches
	// are far smaller).
	maxTlogRecord = 16 << 20
	// ingestTxBytes bounds the log bytes moved in one transaction, so that
	// a backlog does not hold the write connection for long (a few ms):
	// a batch with other records than lines waits for it.
	ingestTxBytes = 1 << 20
	// ingestChunkBytes bounds one transcript_chunks row written by an
	// ingest, so that Load's window read stays small.
	ingestChunkBytes = 256 << 10
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// tlog is one session's log, owned by this Store (it holds lock).
type tlog struct {
	sid  int64
	dir  string
	lock *lockfile.Lock // <sid>.lock, held until Close (which deletes it)

	// imu serialises ingests of this log (the ingester goroutine, a read
	// that wants the newest lines, Close).
	imu sync.Mutex

	// mu guards the fields below and is held for a whole Append of the
	// session, so that a failed Append can take its record back.
	mu     sync.Mutex
	closed bool
	f      *os.File // generation gen, open for append
	gen    int64
	size   int64   // bytes in f
	buf    []byte  // the record being written, reused
	closes []int64 // closed generations not yet moved, oldest first
	// touchedAt is when an Append of this log last committed to SQLite
	// (and so moved last_active), epoch ms.
	touchedAt int64
}

func tlogDir(dbPath string) string { return dbPath + "-transcripts" }

func (l *tlog) path(gen int64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%d.%d.log", l.sid, gen))
}

// tlogRetry is how long logFor waits before it tries again to take a log
// it could not take (another Store held it).
var tlogRetry = time.Second

// logFor returns session sessionID's log, taking it over on first use: a
// nil log (and no error) means that Append saves straight to SQLite for
// this session (another Store holds its log, or this platform has no
// flock); it tries again at most once per tlogRetry. The session must
// exist.
func (s *Store) logFor(ctx context.Context, sessionID string) (*tlog, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.logsClosed {
		return nil, ErrClosed
	}
	if l, ok := s.logs[sessionID]; ok {
		return l, nil
	}
	if t, ok := s.logMissed[sessionID]; ok && time.Since(t) < tlogRetry {
		return nil, nil
	}
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil, ErrClosed
	}
	sid, err := s.sidLocked(ctx, sessionID)
	s.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	l, err := s.adopt(ctx, sid)
	switch {
	case err != nil:
		return nil, err
	case l == nil:
		s.logMissed[sessionID] = time.Now()
	default:
		delete(s.logMissed, sessionID)
		s.logs[sessionID] = l
	}
	return l, nil
}

// adopt takes over session sid's log: it locks it, moves whatever an
// earlier owner left into SQLite, and starts a new generation. It returns
// nil, nil when the log is someone else's.
func (s *Store) adopt(ctx context.Context, sid int64) (*tlog, error) {
	if s.noLog {
		return nil, nil
	}
	dir := tlogDir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		// A read-only directory, say: SQLite will say what is wrong.
		return nil, nil
	}
	lock, err := lockfile.TryLock(filepath.Join(dir, strconv.FormatInt(sid, 10)+".lock"))
	if err != nil {
		// Another Store holds it (or no flock here, or the directory is
		// not ours to write): save straight to SQLite.
		return nil, nil
	}
	l := &tlog{sid: sid, dir: dir, lock: lock}
	gens, err := l.generations()
	if err != nil {
		lock.Release()
		return nil, err
	}
	l.closes = slices.Clone(gens) // ingestClosed edits l.closes
	mark, err := s.ingestClosed(ctx, l)
	if err != nil {
		lock.Release()
		return nil, err
	}
	// The new generation is numbered past every file and every mark, so
	// that nothing written to it counts as moved already.
	l.gen = mark.gen + 1
	if len(gens) > 0 {
		l.gen = max(l.gen, gens[len(gens)-1]+1)
	}
	if err := l.create(); err != nil {
		lock.Release()
		return nil, err
	}
	return l, nil
}

// generations lists the log's generation files, oldest first.
func (l *tlog) generations() ([]int64, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("transcript log: %w", err)
	}
	prefix := strconv.FormatInt(l.sid, 10) + "."
	var gens []int64
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, ".log")
		if !ok {
			continue
		}
		if g, err := strconv.ParseInt(name, 10, 64); err == nil && g > 0 {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// create starts generation l.gen. l.mu must be held (or l not shared yet).
func (l *tlog) create() error {
	f, err := os.OpenFile(l.path(l.gen), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("transcript log: %w", err)
	}
	if _, err := f.Write([]byte(tlogMagic)); err != nil {
		f.Close()
		os.Remove(l.path(l.gen))
		return fmt.Errorf("transcript log %s: %w", l.path(l.gen), err)
	}
	l.f, l.size = f, int64(len(tlogMagic))
	return nil
}

// rotate closes the current generation for ingesting and starts the next.
// It does nothing when the current one is empty. l.mu must be held.
func (l *tlog) rotate() error {
	if l.f == nil || l.size == int64(len(tlogMagic)) {
		return nil
	}
	old, oldGen := l.f, l.gen
	l.gen++
	if err := l.create(); err != nil {
		l.gen--
		return err
	}
	old.Close()
	l.closes = append(l.closes, oldGen)
	return nil
}

// transcriptBytes bounds the size of the log record that recs' transcript
// lines make (0: there are none), and says whether there are other records.
func transcriptBytes(recs []Record) (n int, others bool) {
	for i := range recs {
		if t := recs[i].Transcript; t != nil {
			// The strings and, at most, their four lengths and the ts.
			n += len(t.Agent) + len(t.Role) + len(t.Stream) + len(t.Text) + 5*binary.MaxVarintLen64
		} else {
			others = true
		}
	}
	if n > 0 {
		n += 1 + binary.MaxVarintLen64 // flags, line count
	}
	return n, others
}

// write appends one record holding recs' transcript lines, with one write;
// batch says that the batch commits other records after it (tlogBatch). A
// write that fails is taken back. l.mu must be held.
func (l *tlog) write(recs []Record, batch bool) error {
	if l.closed {
		return ErrClosed
	}
	b := l.encode(recs, batch)
	if b == nil {
		return fmt.Errorf("transcript log: a record over the %d byte limit", maxTlogRecord)
	}
	if cap(b) <= maxKeptChunkBuf {
		l.buf = b
	}
	if _, err := l.f.Write(b); err != nil {
		// A short write leaves part of the record; cut it off so that the
		// next record starts where a reader expects one.
		if terr := l.f.Truncate(l.size); terr != nil {
			return fmt.Errorf("transcript log %s: %w (and taking the record back: %v)", l.path(l.gen), err, terr)
		}
		return fmt.Errorf("transcript log %s: %w", l.path(l.gen), err)
	}
	l.size += int64(len(b))
	return nil
}

// encode returns the record of recs' transcript lines, header included, in
// l.buf's array; nil if its body would be over maxTlogRecord (Append
// checks transcriptBytes, which bounds it, first).
func (l *tlog) encode(recs []Record, batch bool) []byte {
	b := append(l.buf[:0], make([]byte, 8)...)
	var flags byte
	if batch {
		flags |= tlogBatch
	}
	b = append(b, flags)
	var n uint64
	for i := range recs {
		if recs[i].Transcript != nil {
			n++
		}
	}
	b = binary.AppendUvarint(b, n)
	for i := range recs {
		t := recs[i].Transcript
		if t == nil {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(t.Agent)))
		b = append(b, t.Agent...)
		b = appendChunkLine(b, 0, t)
	}
	body := b[8:]
	if len(body) > maxTlogRecord {
		return nil
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(body, crc32c))
	return b
}

// unwrite takes back the last record, of size n, after the SQLite half of
// its Append failed. l.mu must have been held since the write.
func (l *tlog) unwrite(n int64) error {
	l.size -= n
	if err := l.f.Truncate(l.size); err != nil {
		return fmt.Errorf("transcript log %s: %w", l.path(l.gen), err)
	}
	return nil
}

// settle moves the lines of session sessionID's log into SQLite, taking
// the log over if nobody holds it, so that a read sees every line written.
func (s *Store) settle(ctx context.Context, sessionID string) error {
	l, err := s.logFor(ctx, sessionID)
	if err != nil || l == nil {
		return err
	}
	return s.flush(ctx, l)
}

// flush moves everything l holds into SQLite: Load and TranscriptCount call
// it so that they see every line this Store was given.
func (s *Store) flush(ctx context.Context, l *tlog) error {
	l.imu.Lock()
	defer l.imu.Unlock()
	l.mu.Lock()
	err := l.rotate()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = s.ingestClosed(ctx, l)
	return err
}

// ingestClosed moves the closed generations into SQLite, oldest first, and
// deletes them. It returns the session's mark as it was before. l.imu must
// be held (or l not shared yet).
func (s *Store) ingestClosed(ctx context.Context, l *tlog) (tlogMark, error) {
	l.mu.Lock()
	gens := slices.Clone(l.closes)
	l.mu.Unlock()
	s.wmu.Lock()
	var mark, batch tlogMark
	var err error
	if s.closed {
		err = ErrClosed
	} else {
		err = s.w.QueryRowContext(ctx, `SELECT gen, off, batch_gen, batch_off FROM transcript_logs WHERE sid = ?`,
			l.sid).Scan(&mark.gen, &mark.off, &batch.gen, &batch.off)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
	}
	s.wmu.Unlock()
	if err != nil {
		return mark, fmt.Errorf("transcript log: %w", err)
	}
	for _, g := range gens {
		if g >= mark.gen {
			off := int64(len(tlogMagic))
			if g == mark.gen && mark.off > off {
				off = mark.off
			}
			if err := s.ingestFile(ctx, l, g, off, batch); err != nil {
				return mark, err
			}
		}
		if err := os.Remove(l.path(g)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return mark, fmt.Errorf("transcript log: %w", err)
		}
		l.mu.Lock()
		l.closes = slices.DeleteFunc(l.closes, func(x int64) bool { return x == g })
		l.mu.Unlock()
	}
	return mark, nil
}

// tlogMark is a position in a session's log: generation and byte offset.
type tlogMark struct{ gen, off int64 }

// after reports whether m is past o.
func (m tlogMark) after(o tlogMark) bool {
	return m.gen > o.gen || m.gen == o.gen && m.off > o.off
}

// ingestFile moves generation gen of l from byte off to its end (or its
// first bad record) into SQLite, in transactions of about ingestTxBytes,
// each of which also moves the session's mark. A record flagged tlogBatch
// past batch belongs to a batch whose SQLite half never committed: it is
// left out. The lines' bytes go from the record straight into the chunks.
func (s *Store) ingestFile(ctx context.Context, l *tlog, gen, off int64, batch tlogMark) error {
	f, err := os.Open(l.path(gen))
	if errors.Is(err, os.ErrNotExist) {
		return s.ingestLinesTx(ctx, l.sid, nil, &tlogMark{gen + 1, 0})
	}
	if err != nil {
		return fmt.Errorf("transcript log: %w", err)
	}
	defer f.Close()
	var magic [len(tlogMagic)]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != tlogMagic {
		// Empty (the process died creating it) or not ours: nothing in it
		// was acknowledged in this format.
		return s.ingestLinesTx(ctx, l.sid, nil, &tlogMark{gen + 1, 0})
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("transcript log %s: %w", l.path(gen), err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var body []byte
	var lines []rawLine
	end := false
	for !end {
		var mark tlogMark
		// lines passes the next ~ingestTxBytes of records to add, and
		// sets mark to where they end.
		src := func(add func(*rawLine) error) error {
			for read := 0; read < ingestTxBytes; {
				at := off
				n, ok := readTlogRecord(r, &body)
				if ok {
					lines, ok = parseTlogRecord(body, lines[:0])
				}
				if !ok {
					end = true
					break
				}
				off += 8 + int64(n)
				read += 8 + n
				if body[0]&tlogBatch != 0 && (tlogMark{gen, at}).after(batch) {
					continue // its batch never committed
				}
				for i := range lines {
					if err := add(&lines[i]); err != nil {
						return err
					}
				}
			}
			mark = tlogMark{gen, off}
			if end {
				mark = tlogMark{gen + 1, 0}
			}
			return nil
		}
		if err := s.ingestLinesTx(ctx, l.sid, src, &mark); err != nil {
			return err
		}
	}
	return nil
}

// readTlogRecord reads the next record's body into *body and returns its
// length; ok is false at the end of the file or at a record that is cut
// short, too large or fails its checksum.
func readTlogRecord(r *bufio.Reader, body *[]byte) (n int, ok bool) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, false
	}
	size := binary.LittleEndian.Uint32(hdr[0:4])
	if size == 0 || size > maxTlogRecord {
		return 0, false
	}
	n = int(size)
	*body = slices.Grow((*body)[:0], n)[:n]
	if _, err := io.ReadFull(r, *body); err != nil {
		return 0, false
	}
	if crc32.Checksum(*body, crc32c) != binary.LittleEndian.Uint32(hdr[4:8]) {
		return 0, false
	}
	return n, true
}

// rawLine is a transcript line of a log record; its slices point into the
// record.
type rawLine struct {
	agent, role, stream, text []byte
	ts                        int64
}

// parseTlogRecord appends the lines of record body to lines; ok is false if
// the body does not parse (then it is treated as damage).
func parseTlogRecord(body []byte, lines []rawLine) ([]rawLine, bool) {
	if len(body) == 0 {
		return lines, false
	}
	p := 1 // flags
	n, m := binary.Uvarint(body[p:])
	if m <= 0 || n > uint64(len(body)) {
		return lines, false
	}
	p += m
	for range n {
		var l rawLine
		if l.agent, p = bytesAt(body, p); p < 0 {
			return lines, false
		}
		ts, m := binary.Varint(body[p:])
		if m <= 0 {
			return lines, false
		}
		l.ts, p = ts, p+m
		if l.role, p = bytesAt(body, p); p < 0 {
			return lines, false
		}
		if l.stream, p = bytesAt(body, p); p < 0 {
			return lines, false
		}
		if l.text, p = bytesAt(body, p); p < 0 {
			return lines, false
		}
		lines = append(lines, l)
	}
	return lines, p == len(body)
}

// bytesAt returns the length-prefixed bytes at p of b and the offset after
// them, or -1.
func bytesAt(b []byte, p int) ([]byte, int) {
	l, m := binary.Uvarint(b[p:])
	if m <= 0 || l > uint64(len(b)-p-m) {
		return nil, -1
	}
	p += m
	return b[p : p+int(l)], p + int(l)
}

// ingestLinesTx saves the lines src passes (transcript lines of session
// sid) and moves the session's mark to *mark, which src sets, in one
// transaction.
func (s *Store) ingestLinesTx(ctx context.Context, sid int64, src func(add func(*rawLine) error) error, mark *tlogMark) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.writeLocked(ctx, sid, nil, writeOpts{ingested: mark, lines: src}); err != nil {
		return fmt.Errorf("transcript log: save: %w", err)
	}
	return nil
}
