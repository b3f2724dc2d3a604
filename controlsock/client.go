package controlsock

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/protocol"
)

var (
	errShuttingDown   = errors.New("the fleet is shutting down")
	errTooManyClients = errors.New("too many clients attached")
)

// closeReason says why a connection ended; it is logged and counted.
type closeReason string

const (
	reasonClientGone   closeReason = "client disconnected"
	reasonHelloTimeout closeReason = "no hello in time"
	reasonAuth         closeReason = "authentication failed"
	reasonBadHello     closeReason = "bad hello"
	reasonTooLarge     closeReason = "frame over the size cap"
	reasonSlowQueue    closeReason = "slow consumer: outbound queue over its byte bound"
	reasonSlowDeadline closeReason = "slow consumer: write deadline exceeded"
	reasonShutdown     closeReason = "server shutdown"
	reasonRefused      closeReason = "refused at attach"
	reasonReadError    closeReason = "read error"
	// reasonProbe: closed before sending a byte, as the liveness probes
	// of fleet ls, the hub's rescans and a starting fleet's stale-socket
	// check do (on Windows every listing probes each fleet's pipe).
	reasonProbe closeReason = "closed before hello"
)

// handshakeWriteTimeout bounds the one error frame written to a client that
// is being turned away or evicted: it must not hold anything up.
const handshakeWriteTimeout = 500 * time.Millisecond

// client is one attached connection: a reader (the serve goroutine) and a
// writer goroutine that drains a bounded queue of shared, pre-encoded frames.
type client struct {
	srv     *Server
	conn    net.Conn
	id      uint64
	surface Surface
	log     func(msg string, args ...any)

	// Set during the handshake, read-only after attach.
	name, kind string

	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	inflight   chan struct{}  // semaphore for concurrent native requests
	wg         sync.WaitGroup // native request goroutines
	writerDone chan struct{}

	// mu guards the outbound queue and the close state. Never held during I/O.
	mu      sync.Mutex
	queue   [][]byte    // frames waiting for the writer; shared, never modified
	owners  []*batchBuf // per queue entry: the pooled buffer it is in, or nil
	queued  int         // bytes in queue
	writing int         // bytes swapped out to the writer and not yet written
	// Flow control (flow.go): congested while queued+writing is over the
	// soft bound; stalled when congested without progress for StallGrace.
	congested  bool
	stalled    bool
	progressAt time.Time // last completed write, or when the backlog began
	closing    bool      // no more frames are accepted
	flush      bool      // when closing: write what is queued first
	reason     closeReason
	wake       chan struct{} // cap 1: queue became non-empty or closing set
}

func newClient(s *Server, conn net.Conn, id uint64, surface Surface) *client {
	ctx, cancel := context.WithCancel(context.Background())
	c := &client{
		srv:      s,
		conn:     conn,
		id:       id,
		surface:  surface,
		ctx:      ctx,
		cancel:   cancel,
		inflight: make(chan struct{}, s.cfg.MaxInflight),
		wake:     make(chan struct{}, 1),

		writerDone: make(chan struct{}),
	}
	c.log = func(msg string, args ...any) {
		s.log.Info(msg, append([]any{"client", c.id, "name", c.name, "kind", c.kind}, args...)...)
	}
	return c
}

// serve runs the connection: handshake, attach, then the read loop. The
// writer goroutine starts after attach and is waited for before returning.
func (c *client) serve() {
	defer c.cancel()
	defer c.conn.Close()
	r := protocol.NewReader(c.conn, protocol.MaxFrameSize)
	if reason, err := c.handshake(r); err != nil {
		if reason == reasonAuth || reason == reasonHelloTimeout || reason == reasonBadHello {
			c.srv.authFail.Add(1)
		}
		if reason == reasonProbe {
			c.srv.log.Debug("connection closed before hello", "client", c.id)
			return
		}
		c.rejectNow(err.Error())
		c.srv.log.Info("connection refused", "client", c.id, "reason", reason, "err", err)
		return
	}
	if err := c.srv.attach(c); err != nil {
		c.rejectNow(err.Error())
		c.srv.log.Info("connection refused", "client", c.id, "reason", reasonRefused, "err", err)
		return
	}
	c.log("client attached")
	go func() {
		defer close(c.writerDone)
		c.writeLoop()
	}()
	reason := c.readLoop(r)
	c.srv.detach(c)
	c.closeWith(reason, false) // no-op when a flushing close is under way
	<-c.writerDone             // bounded by the write deadline
	c.cancel()                 // stop native requests in flight
	c.wg.Wait()
	c.mu.Lock()
	reason = c.reason
	c.mu.Unlock()
	c.log("client detached", "reason", reason)
}

// handshake reads and checks the hello frame.
func (c *client) handshake(r *protocol.Reader) (closeReason, error) {
	if want := *c.srv.cfg.AllowUID; want >= 0 && c.surface == SurfaceSocket {
		uid, ok, err := peerUID(c.conn)
		if err != nil {
			return reasonAuth, fmt.Errorf("cannot read peer credentials: %w", err)
		}
		if ok && uid != want {
			return reasonAuth, errors.New("permission denied: connection from another user")
		}
	}
	c.conn.SetReadDeadline(time.Now().Add(c.srv.cfg.HelloTimeout))
	frame, err := r.ReadFrame()
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return reasonHelloTimeout, fmt.Errorf("no hello within %s", c.srv.cfg.HelloTimeout)
		case errors.Is(err, protocol.ErrFrameTooLarge):
			c.srv.tooLarge.Add(1)
			return reasonTooLarge, fmt.Errorf("frame exceeds %d bytes", protocol.MaxFrameSize)
		case errors.Is(err, io.EOF):
			return reasonProbe, errors.New("closed before hello")
		default:
			return reasonReadError, fmt.Errorf("read hello: %w", err)
		}
	}
	c.conn.SetReadDeadline(time.Time{})
	m, err := protocol.Decode(frame)
	if err != nil {
		return reasonBadHello, fmt.Errorf("expected hello: %s", safeErr(err))
	}
	h, ok := m.(*protocol.Hello)
	if !ok {
		return reasonBadHello, fmt.Errorf("expected hello as the first frame, got %q", m.MessageType())
	}
	// Hash both sides so the comparison is constant-time in the length too.
	got, want := sha256.Sum256([]byte(h.Token)), sha256.Sum256([]byte(c.srv.cfg.Token))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return reasonAuth, errors.New("authentication failed: bad token")
	}
	switch h.ClientKind {
	case protocol.ClientREPL, protocol.ClientBot, protocol.ClientOther:
	default:
		return reasonBadHello, fmt.Errorf("hello: clientKind must be repl, bot or other, got %q", truncate(string(h.ClientKind), 64))
	}
	if h.ProtocolVersion != nil && *h.ProtocolVersion > protocol.Version {
		return reasonBadHello, fmt.Errorf("protocol version %d is not supported: this fleet speaks protocol version %d", *h.ProtocolVersion, protocol.Version)
	}
	c.kind = string(h.ClientKind)
	c.name = truncate(h.ClientName, 128)
	return "", nil
}

// rejectNow writes one error frame with a short deadline and gives up. Used
// before the writer goroutine exists.
func (c *client) rejectNow(msg string) {
	frame, err := protocol.Encode(&protocol.Error{Message: protocol.CutText(msg, maxErrorText)})
	if err != nil {
		return
	}
	c.conn.SetWriteDeadline(time.Now().Add(handshakeWriteTimeout))
	c.conn.Write(frame)
}

// readLoop reads frames until the connection ends and returns why.
func (c *client) readLoop(r *protocol.Reader) closeReason {
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			switch {
			case errors.Is(err, protocol.ErrFrameTooLarge):
				c.srv.tooLarge.Add(1)
				// The stream cannot be resynchronised: say so and close.
				c.sendError(fmt.Sprintf("frame exceeds %d bytes; closing the connection", protocol.MaxFrameSize))
				c.closeWith(reasonTooLarge, true)
				return reasonTooLarge
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				// The client may only have closed its write side (a script
				// piping frames into socat or nc): it still gets what was
				// queued for it, then the connection closes.
				c.closeWith(reasonClientGone, true)
				return reasonClientGone
			case errors.Is(err, net.ErrClosed):
				return reasonClientGone
			default:
				return reasonReadError
			}
		}
		c.handle(frame)
	}
}

// handle dispatches one frame received after the handshake.
func (c *client) handle(frame []byte) {
	typ, err := protocol.PeekType(frame)
	if err != nil {
		c.sendError(safeErr(err))
		return
	}
	if typ == protocol.TypeNativeRoot {
		c.handleNative(frame)
		return
	}
	m, err := protocol.Decode(frame)
	if err != nil {
		c.sendError(safeErr(err))
		return
	}
	b := c.srv.cfg.Backend
	switch m := m.(type) {
	case *protocol.Ping:
		c.enqueue(pongFrame)
	case *protocol.Hello:
		c.sendError("already authenticated: hello is only valid as the first frame")
	case *protocol.Prompt:
		c.handlePrompt(m, frame)
	case *protocol.ConfirmResponse:
		c.answered(b.AnswerConfirm(m.ID, m.Approve, c.surface.resolveReason()))
	case *protocol.AskResponse:
		c.answered(b.AnswerAsk(m.ID, m.Text, c.surface.resolveReason()))
	case *protocol.Unknown:
		// Additive protocol: unknown types are ignored.
	default:
		// A known server→client type sent by a client: not a request.
		c.sendError(fmt.Sprintf("%s is a server message and cannot be sent by a client", typ))
	}
}

// answered tells the client that its answer was not taken, when err says
// so. The error goes out before anything this connection sends next (a
// pong, say), so a client that pings after answering knows, at the pong,
// that its answer was taken (docs/protocol-decisions.md).
func (c *client) answered(err error) {
	if err == nil {
		return
	}
	if pe, ok := errors.AsType[*protocol.Error](err); ok {
		c.sendFrame(pe)
		return
	}
	c.sendError(err.Error())
}

func (c *client) handlePrompt(m *protocol.Prompt, frame []byte) {
	if m.RequestID == "" && hasKey(frame, "requestId") || len(m.RequestID) > 256 {
		c.sendError("prompt: requestId must be 1 to 256 characters")
		return
	}
	if m.Text == "" {
		c.sendError("prompt: text must not be empty")
		return
	}
	// Refused before anything is queued or saved: the echo that carries
	// the text whole must fit a frame (protocol.MaxPromptText).
	if err := protocol.CheckPromptText(m.Text); err != nil {
		c.sendError(err.Error() + "; nothing was queued")
		return
	}
	source := c.name
	if source == "" {
		source = c.kind
	}
	c.srv.cfg.Backend.Prompt(&protocol.UserMessage{Source: source, Text: m.Text, RequestID: m.RequestID})
}

// hasKey reports whether a top-level key is present in a JSON object frame.
// Used only on the rare paths where absent and empty must be told apart.
func hasKey(frame []byte, key string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(frame, &obj) != nil {
		return false
	}
	_, ok := obj[key]
	return ok
}

var pongFrame = mustEncode(&protocol.Pong{})

// maxErrorText bounds an error frame's message: some quote what a client
// sent.
const maxErrorText = 4 << 10

func (c *client) sendError(msg string) {
	c.sendFrame(&protocol.Error{Message: protocol.CutText(msg, maxErrorText)})
}

// sendFrame queues one frame for this client only.
func (c *client) sendFrame(m protocol.Message) {
	frame, err := protocol.Encode(m)
	if err != nil {
		return
	}
	c.enqueue(frame)
}

// enqueue queues a frame for the writer. It never blocks and never does I/O.
// A backlog (queued plus being written) over the byte bound evicts the
// client (slow consumer).
func (c *client) enqueue(frame []byte) { c.enqueueOwned(frame, nil) }

// enqueueOwned is enqueue for a frame inside a pooled broadcast buffer:
// when it reports true, the writer releases one reference to owner once
// the frame is written. Frames dropped unwritten (an evicted or closed
// client) never release theirs, so their buffer goes to the GC instead of
// back to the pool: a missed release costs an allocation, never a reuse.
func (c *client) enqueueOwned(frame []byte, owner *batchBuf) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	wasEmpty := len(c.queue) == 0
	backlog := c.queued + c.writing
	if backlog+len(frame) > c.srv.cfg.MaxQueueBytes {
		c.evictLocked(reasonSlowQueue)
		c.mu.Unlock()
		c.srv.slowQueue.Add(1)
		c.srv.log.Warn("slow consumer evicted", "client", c.id, "name", c.name, "kind", c.kind,
			"reason", reasonSlowQueue, "backlogBytes", backlog, "limit", c.srv.cfg.MaxQueueBytes)
		return false
	}
	if backlog == 0 {
		c.progressAt = time.Now()
	}
	c.queue = append(c.queue, frame)
	c.owners = append(c.owners, owner)
	c.queued += len(frame)
	if !c.congested && backlog+len(frame) > c.srv.cfg.SoftQueueBytes {
		c.setCongestedLocked(true)
	}
	c.mu.Unlock()
	if wasEmpty {
		c.signal()
	}
	return true
}

// evictLocked drops the queue and leaves one final error frame to be written
// with a short deadline. c.mu must be held.
func (c *client) evictLocked(reason closeReason) {
	clear(c.queue)
	clear(c.owners) // unwritten: their buffers go to the GC
	c.queue, c.owners = c.queue[:0], c.owners[:0]
	c.queued = 0
	if frame, err := protocol.Encode(&protocol.Error{Message: string(reason) + "; disconnected"}); err == nil {
		c.queue = append(c.queue, frame)
		c.owners = append(c.owners, nil)
		c.queued = len(frame)
	}
	c.closing, c.flush, c.reason = true, true, reason
	c.setCongestedLocked(false)
	c.signal()
}

func (c *client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// closeWith stops the client from accepting frames. With flush, the writer
// writes what is queued before closing; without, it closes at once.
func (c *client) closeWith(reason closeReason, flush bool) {
	c.mu.Lock()
	if !c.closing {
		c.closing, c.flush, c.reason = true, flush, reason
	}
	c.setCongestedLocked(false) // a closing client never holds producers back
	closeNow := !c.flush
	c.mu.Unlock()
	c.signal()
	if closeNow {
		c.conn.Close()
	}
}

// closeAfterFlush is used at shutdown: clients get what was already queued
// (for example the confirmResolved "cancelled" frames) before the close.
func (c *client) closeAfterFlush() {
	c.closeWith(reasonShutdown, true)
}

// writeLoop is the only writer on the connection. It swaps the queue out
// under the lock and writes the batch with one writev outside it.
func (c *client) writeLoop() {
	defer c.conn.Close() // unblocks the reader when the writer gives up
	var batch [][]byte
	var owners []*batchBuf
	var iov net.Buffers // scratch for chunkOf
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closing {
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.ctx.Done():
				return
			}
			c.mu.Lock()
		}
		batch, c.queue = c.queue, batch[:0]
		owners, c.owners = c.owners, owners[:0]
		c.writing += c.queued
		c.queued = 0
		closing, flush, reason := c.closing, c.flush, c.reason
		c.mu.Unlock()

		if closing && !flush {
			return
		}
		timeout := c.srv.cfg.WriteTimeout
		if closing && reason != reasonShutdown {
			timeout = handshakeWriteTimeout
		}
		// Write in chunks of at most writeChunk bytes, each with its own
		// deadline, so that progress is seen every writeChunk bytes the
		// client takes: runs of small frames copied into one buffer, large
		// entries (a broadcast batch, a hydrate) as they are in one writev,
		// the last one cut where the chunk ends and finished by the next.
		// off is how much of batch[i] is already written.
		for i, off := 0, 0; i < len(batch); {
			c.conn.SetWriteDeadline(time.Now().Add(timeout))
			var n int64
			var err error
			var buf *coalesced
			if off == 0 {
				buf = coalesce(batch[i:])
			}
			if buf != nil {
				var m int
				m, err = c.conn.Write(buf.b)
				n = int64(m)
				putCoalesced(buf)
			} else {
				iov = chunkOf(batch[i:], off, iov)
				bufs := iov // WriteTo consumes bufs
				n, err = bufs.WriteTo(c.conn)
				clear(iov)
			}
			// Release the entries this write finished.
			for off += int(n); i < len(batch) && off >= len(batch[i]); i++ {
				off -= len(batch[i])
				if o := owners[i]; o != nil {
					o.release()
					owners[i] = nil
				}
			}
			if err != nil {
				clear(batch)
				clear(owners)
				if errors.Is(err, os.ErrDeadlineExceeded) && !closing {
					c.srv.slowDL.Add(1)
					c.srv.log.Warn("slow consumer evicted", "client", c.id, "name", c.name, "kind", c.kind,
						"reason", reasonSlowDeadline, "deadline", timeout, "written", n)
					c.mu.Lock()
					c.closing, c.flush, c.reason = true, false, reasonSlowDeadline
					c.setCongestedLocked(false)
					c.mu.Unlock()
				}
				return
			}
			c.mu.Lock()
			c.writing -= int(n)
			c.progressLocked()
			c.mu.Unlock()
		}
		clear(batch)
		if closing {
			// Everything queued before the close was written; anything
			// enqueued later was refused.
			return
		}
	}
}

// batchBuf is one broadcast batch's encoded frames, queued to every
// client at once. It counts one reference for the broadcaster and one per
// client queue it is in; the last release puts it back in batchPool.
// Pooling it halves what a burst allocates, and so how often the GC runs.
type batchBuf struct {
	b    []byte
	refs atomic.Int32
}

var batchPool = sync.Pool{New: func() any { return new(batchBuf) }}

// maxPooledBatch bounds the buffers kept for reuse: a rare huge batch is
// left to the GC rather than held.
const maxPooledBatch = 1 << 20

// getBatchBuf returns an empty buffer of at least size bytes, holding the
// caller's reference.
func getBatchBuf(size int) *batchBuf {
	bb := batchPool.Get().(*batchBuf)
	if cap(bb.b) < size {
		bb.b = make([]byte, 0, size)
	}
	bb.b = bb.b[:0]
	bb.refs.Store(1)
	return bb
}

func (bb *batchBuf) retain() { bb.refs.Add(1) }

func (bb *batchBuf) release() {
	switch n := bb.refs.Add(-1); {
	case n == 0 && cap(bb.b) <= maxPooledBatch:
		batchPool.Put(bb)
	case n < 0:
		panic("controlsock: batch buffer released twice")
	}
}

// maxIovecs is the most frames handed to one writev (Linux's IOV_MAX).
const maxIovecs = 1024

// writeChunk bounds one write to a client. Progress (flow.go) and the
// write deadline are seen per write, so bounded writes make them measure
// what the client takes, however much is queued for it: a blocked write
// completes once the client has drained its socket buffer far enough
// (Linux wakes the writer at a quarter full, so about every 192 KiB with
// the default buffer). Unbounded, one writev carried everything queued
// (a megabyte and more during a burst), and a console steadily reading a
// few MB/s completed no write for StallGrace, was taken for stalled,
// flooded and evicted by the byte bound. Capping writev at 64 KiB costs
// nothing measurable (docs/performance.md).
const writeChunk = 64 << 10

// coalesceBytes is the size of the buffers small frames are copied into
// for one write; pooled, so idle clients hold none. Entries of directBytes
// or more are written as they are.
const (
	coalesceBytes = writeChunk
	directBytes   = 4 << 10
)

type coalesced struct {
	b      []byte
	frames int // how many frames of the chunk it holds
}

var coalescePool = sync.Pool{New: func() any { return &coalesced{b: make([]byte, 0, coalesceBytes)} }}

// coalesce copies the leading small entries of queue that fit in one
// pooled buffer, or returns nil when the first one is not small (it goes
// out as it is).
func coalesce(queue [][]byte) *coalesced {
	if len(queue[0]) >= directBytes {
		return nil
	}
	c := coalescePool.Get().(*coalesced)
	c.b, c.frames = c.b[:0], 0
	for _, f := range queue {
		if len(f) >= directBytes || len(c.b)+len(f) > coalesceBytes {
			break
		}
		c.b = append(c.b, f...)
		c.frames++
	}
	return c
}

func putCoalesced(c *coalesced) { coalescePool.Put(c) }

// chunkOf is the next write of large entries into iov: the first from
// off, then the large ones after it, writeChunk bytes and maxIovecs
// entries at most, the last one cut to fit.
func chunkOf(entries [][]byte, off int, iov net.Buffers) net.Buffers {
	iov = iov[:0]
	room := writeChunk
	for k, e := range entries {
		if k > 0 && (len(e) < directBytes || room == 0 || len(iov) == maxIovecs) {
			break
		}
		e = e[off:]
		off = 0
		if len(e) > room {
			e = e[:room]
		}
		iov = append(iov, e)
		room -= len(e)
	}
	return iov
}

func safeErr(err error) string {
	var de *protocol.DecodeError
	if errors.As(err, &de) {
		return de.Msg
	}
	return err.Error()
}

// truncate shortens s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
