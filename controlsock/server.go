// Package controlsock serves the fleet's control socket: the hello handshake,
// replay on attach, request routing to the fleet, and the encode-once fan-out
// of every event to every attached client through bounded per-client queues.
//
// Data flows one way: the engine calls Broadcast; the server never calls back
// into the engine while it holds its own lock, so the lock order is strictly
// engine → Server.mu → client.mu.
package controlsock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// Backend is the part of the fleet the server drives. It is declared here, by
// its consumer, so the server does not know the engine's internals. Methods
// are called from connection goroutines without any server lock held.
type Backend interface {
	// Prompt routes a prompt to the coordinator. The backend publishes m,
	// the userMessage echo (source and requestId filled in by the server),
	// before acting on the prompt, so that the echo is ordered and saved
	// with everything else the fleet says.
	Prompt(m *protocol.UserMessage)
	// AnswerConfirm and AnswerAsk resolve a pending request. reason is the
	// confirmResolved reason the other surfaces are told: "answered" for a
	// socket client, "superseded" for the fleet's own terminal. The error's
	// text is sent to the client as-is, so it must be safe to show.
	AnswerConfirm(id string, approve bool, reason string) error
	AnswerAsk(id, text string, reason string) error
	// Native answers a nativeRoot request (already checked for the strict
	// frame shape). It may block; it runs on its own goroutine.
	Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult
}

// Surface says where an answer came from. An answer from the fleet's own
// terminal resolves the request for socket clients as "superseded".
type Surface int

const (
	SurfaceSocket Surface = iota
	SurfaceTerminal
)

// resolveReason is the confirmResolved reason an answer from s gives.
func (s Surface) resolveReason() string {
	if s == SurfaceTerminal {
		return "superseded"
	}
	return "answered"
}

// Config configures a Server. Token and Backend are required.
type Config struct {
	Token   string
	Backend Backend
	// Welcome carries the session fields of the welcome frame; the server
	// fills in protocolVersion and capabilities.
	Welcome protocol.Welcome
	Logger  *slog.Logger

	HelloTimeout  time.Duration // default 10 s
	WriteTimeout  time.Duration // per write batch; default 10 s
	MaxClients    int           // default 4096
	MaxQueueBytes int           // per-client outbound bound; default 8 MiB
	// SoftQueueBytes is the backlog over which a client counts as congested
	// and Throttle holds producers back (flow.go); default 1 MiB.
	SoftQueueBytes int
	// StallGrace is how long a congested client may go without completing a
	// write before it no longer holds producers back; default 200 ms.
	StallGrace time.Duration
	// MaxInflight bounds concurrent native requests per client; default 16.
	MaxInflight int
	// SendBufferBytes is the socket send buffer asked of the kernel for
	// each client connection; default 128 KiB, which Linux doubles to
	// 256 KiB (within net.core.wmem_max), against the usual 208 KiB
	// default: measured, K=16 fan-out a few percent faster (fewer
	// wake-ups of the writer and of the client reading) for 48 KiB more
	// kernel memory per busy client (docs/performance.md). Negative: keep
	// the system's default.
	SendBufferBytes int
	// History bounds the replay window kept for hydrate.
	History HistoryLimits
	// AllowUID, when >= 0, is the only peer uid accepted on Unix sockets
	// (defence in depth on top of the 0700 directory and the token). Use -1
	// to skip the check; the default 0 value means "the server's own uid".
	AllowUID *int
}

func (c *Config) setDefaults() {
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.MaxClients <= 0 {
		c.MaxClients = 4096
	}
	if c.MaxQueueBytes <= 0 {
		c.MaxQueueBytes = 8 << 20
	}
	if c.SoftQueueBytes <= 0 {
		c.SoftQueueBytes = min(1<<20, c.MaxQueueBytes/2)
	}
	if c.StallGrace <= 0 {
		c.StallGrace = 200 * time.Millisecond
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = 16
	}
	if c.SendBufferBytes == 0 {
		c.SendBufferBytes = 128 << 10
	}
	c.History.setDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AllowUID == nil {
		uid := os.Getuid()
		c.AllowUID = &uid
	}
}

// Stats are counters for operators and tests.
type Stats struct {
	Clients        int
	Accepted       uint64
	AuthFailures   uint64
	SlowQueue      uint64 // evicted: outbound queue over its byte bound
	SlowDeadline   uint64 // evicted: a write batch missed its deadline
	Stalls         uint64 // congested clients that stopped holding producers back
	FramesTooLarge uint64 // received from clients over the cap
	// FramesShortened counts events over the cap that were sent with
	// their texts cut, or replaced by a note (Broadcast).
	FramesShortened uint64
	Broadcasts      uint64
}

// Server is a control-socket server. Create it with New, feed it events with
// Broadcast, serve listeners with Serve, and stop it with Shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	welcome []byte // encoded once: every client gets the same bytes

	// mu guards everything below. Lock order: Server.mu before client.mu.
	// Broadcast holds mu while it enqueues to every client, and attach holds
	// it while it enqueues the replay and registers the client, so no frame
	// can fall between a client's replay and its live stream.
	mu        sync.Mutex
	clients   map[*client]struct{}
	listeners map[net.Listener]struct{}
	replay    replayCache
	closing   bool

	wg        sync.WaitGroup // every goroutine the server starts
	nextID    atomic.Uint64
	accepted  atomic.Uint64
	authFail  atomic.Uint64
	slowQueue atomic.Uint64
	slowDL    atomic.Uint64
	tooLarge  atomic.Uint64
	shortened atomic.Uint64
	bcasts    atomic.Uint64
	stalls    atomic.Uint64

	// Flow control (flow.go): congested counts clients over the soft bound
	// that are not stalled; relief is closed and replaced when it drops to 0.
	congested atomic.Int64
	reliefMu  sync.Mutex
	relief    chan struct{}
	serving   bool // Serve or ServeConn was called; guarded by mu
}

// New returns a server. It panics if Token is missing: that is a
// programming error, not an operating condition. Backend may be left out
// and given with Attach: the fleet builds the server first (it is where the
// engine's events go) and the engine it drives after it.
func New(cfg Config) *Server {
	if cfg.Token == "" {
		panic("controlsock: Config.Token is required")
	}
	cfg.setDefaults()
	w := cfg.Welcome
	w.ProtocolVersion = protocol.Int(protocol.Version)
	w.Capabilities = protocol.Capabilities()
	welcome, err := protocol.Encode(&w)
	if err != nil {
		panic("controlsock: encode welcome: " + err.Error())
	}
	return &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		welcome:   welcome,
		clients:   make(map[*client]struct{}),
		listeners: make(map[net.Listener]struct{}),
		replay:    newReplayCache(cfg.History),
		relief:    make(chan struct{}),
	}
}

// Attach sets the backend that clients' requests go to, when Config had
// none. It must be called once, before Serve and ServeConn.
func (s *Server) Attach(b Backend) {
	if b == nil || s.cfg.Backend != nil {
		panic("controlsock: Attach needs a backend, once, and only when Config.Backend was not set")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		panic("controlsock: Attach after Serve")
	}
	s.cfg.Backend = b
}

func (s *Server) checkBackend() {
	if s.cfg.Backend == nil {
		panic("controlsock: Serve before Attach (no Backend)")
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("controlsock: server closed")

// Serve accepts connections on ln until Shutdown or a listener error. It
// closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.checkBackend()
	s.serving = true
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				// Out of file descriptors and similar: back off instead of
				// spinning, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accepted.Add(1)
		s.ServeConn(conn, SurfaceSocket)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// ServeConn serves one already-accepted connection (a socket client, or an
// in-process pipe for the fleet's own terminal with SurfaceTerminal). It
// returns at once; the connection is served on goroutines the server owns.
func (s *Server) ServeConn(conn net.Conn, surface Surface) {
	s.mu.Lock()
	s.checkBackend()
	s.serving = true
	if s.closing {
		// Accepted just as Shutdown began: Shutdown may already be waiting
		// for the server's goroutines, so none may be added now.
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	if uc, ok := conn.(*net.UnixConn); ok && s.cfg.SendBufferBytes > 0 {
		if err := uc.SetWriteBuffer(s.cfg.SendBufferBytes); err != nil {
			s.log.Debug("could not size the socket send buffer", "err", err)
		}
	}
	c := newClient(s, conn, s.nextID.Add(1), surface)
	go func() {
		defer s.wg.Done()
		c.serve()
	}()
}

// Broadcast encodes m once and queues the same bytes to every attached
// client. It never blocks on a client: a client whose queue is over its bound
// is evicted instead. It also updates the replay cache, so a client that
// attaches later sees what it needs of m.
func (s *Server) Broadcast(m protocol.Message) {
	frame, m, ok := s.fit(nil, m)
	if !ok {
		return
	}
	s.bcasts.Add(1)
	s.mu.Lock()
	s.replay.observe(m, frame)
	for c := range s.clients {
		c.enqueue(frame)
	}
	s.mu.Unlock()
}

// BroadcastBatch is Broadcast for several messages in order: one lock of
// the server and of each client for the whole batch instead of one per
// message (the journal hands over what one transaction saved).
//
// The batch is encoded into one pooled buffer (batchBuf): each client
// queues it as one slice (rather than a slice per frame) and writes it
// without copying. The replay cache copies what it keeps, so the buffer is
// only held by the queues it is in, and goes back to the pool once the
// last of them wrote it.
func (s *Server) BroadcastBatch(ms []protocol.Message) {
	size := 0
	for _, m := range ms {
		size += sizeHint(m)
	}
	bb := getBatchBuf(size)
	defer bb.release() // the broadcaster's reference
	buf := bb.b
	// Each message's frame, for the replay cache (nil if it did not
	// encode). If buf grows, earlier frames stay in the old array and buf
	// has a copy of them.
	frames := make([][]byte, len(ms))
	sent := ms // what each frame encodes: ms, unless one was shortened
	n := 0
	for i, m := range ms {
		start := len(buf)
		next, fitted, ok := s.fit(buf, m)
		if !ok {
			continue
		}
		if fitted != m {
			if &sent[0] == &ms[0] {
				sent = slices.Clone(ms) // the caller's slice is theirs
			}
			sent[i] = fitted
		}
		buf = next
		frames[i] = buf[start:len(buf):len(buf)]
		n++
	}
	if n == 0 {
		return
	}
	bb.b = buf // AppendEncode may have grown it
	run := buf[:len(buf):len(buf)]
	s.bcasts.Add(uint64(n))
	s.mu.Lock()
	for i, m := range sent {
		if frames[i] != nil {
			s.replay.observe(m, frames[i])
		}
	}
	for c := range s.clients {
		bb.retain()
		if !c.enqueueOwned(run, bb) {
			bb.release()
		}
	}
	s.mu.Unlock()
}

// fit appends m's frame to dst. A message too large for a frame is sent
// shortened, its longest texts cut and marked (protocol.AppendFit); one
// that cannot be shortened enough is replaced by a system line that says
// what was dropped. So no frame a client must refuse is ever sent, and no
// event is lost without a word. It returns the message the frame encodes
// (for the replay window), and false when nothing could be encoded.
func (s *Server) fit(dst []byte, m protocol.Message) ([]byte, protocol.Message, bool) {
	out, fitted, err := protocol.AppendFit(dst, m)
	if err == nil {
		if fitted != m {
			s.shortened.Add(1)
			s.log.Warn("broadcast: an event over the frame size limit was sent with its longest texts cut", "type", m.MessageType())
		}
		return out, fitted, true
	}
	if err != protocol.ErrFrameTooLarge {
		s.log.Error("broadcast: encode failed; frame dropped", "type", m.MessageType(), "err", err)
		return dst, nil, false
	}
	s.shortened.Add(1)
	s.log.Error("broadcast: an event too large for a frame even with its texts cut was replaced by a note", "type", m.MessageType())
	note := &protocol.Transcript{Role: protocol.RoleSystem, Ts: time.Now().UnixMilli(),
		Text: fmt.Sprintf("A %s event was too large to send (over %d bytes with its texts cut); it was dropped.",
			protocol.CutText(m.MessageType(), 64), protocol.MaxFrameSize)}
	out, err = protocol.AppendEncode(dst, note)
	if err != nil {
		return dst, nil, false
	}
	return out, note, true
}

// sizeHint estimates m's frame size (escapes may make it longer).
func sizeHint(m protocol.Message) int {
	if t, ok := m.(*protocol.Transcript); ok && t != nil {
		return len(t.Text) + len(t.Agent) + 96
	}
	return 512
}

// SeedHistory loads a resumed session's saved history into the replay
// window, so consoles attaching after a restart see it in hydrate. Call it
// before serving. conversationTotal is the session's whole conversation
// length (hydrate is truncated when it exceeds the window).
func (s *Server) SeedHistory(h *protocol.Hydrate, conversationTotal int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replay.seed(h, conversationTotal)
}

// Shutdown stops accepting, gives every client until ctx is done to receive
// what is already queued, then closes all connections and waits for the
// server's goroutines to exit.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	clients := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	for _, c := range clients {
		c.closeAfterFlush()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	// Out of patience: close every connection without waiting on writes.
	s.mu.Lock()
	for c := range s.clients {
		c.conn.Close()
	}
	s.mu.Unlock()
	for _, c := range clients {
		c.conn.Close()
	}
	<-done
	return ctx.Err()
}

// SoftQueueBytes is the backlog over which a client holds producers back.
func (s *Server) SoftQueueBytes() int { return s.cfg.SoftQueueBytes }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	return Stats{
		Clients:         n,
		Accepted:        s.accepted.Load(),
		AuthFailures:    s.authFail.Load(),
		SlowQueue:       s.slowQueue.Load(),
		SlowDeadline:    s.slowDL.Load(),
		FramesTooLarge:  s.tooLarge.Load(),
		FramesShortened: s.shortened.Load(),
		Broadcasts:      s.bcasts.Load(),
		Stalls:          s.stalls.Load(),
	}
}

// attach registers c and queues welcome, the replay and replayEnd, all under
// s.mu so no live frame can come before or inside the replay.
func (s *Server) attach(c *client) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	if len(s.clients) >= s.cfg.MaxClients {
		return errTooManyClients
	}
	c.enqueue(s.welcome)
	s.replay.writeTo(c)
	c.enqueue(replayEndFrame)
	s.clients[c] = struct{}{}
	return nil
}

func (s *Server) detach(c *client) {
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
}

var replayEndFrame = mustEncode(&protocol.ReplayEnd{})

func mustEncode(m protocol.Message) []byte {
	b, err := protocol.Encode(m)
	if err != nil {
		panic(err)
	}
	return b
}
