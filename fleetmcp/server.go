package fleetmcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agents-fleet/fleet/provider"
)

const (
	// ServerName is the MCP server's name: Claude shows its tools as
	// mcp__fleet__<tool>.
	ServerName = "fleet"
	// Path is the one HTTP path the server answers on.
	Path = "/mcp"

	// tokenBytes is the entropy of an agent's token (hex-encoded on the wire).
	tokenBytes = 32
	// maxBodyBytes bounds one HTTP request body. The largest argument a tool
	// takes is 64 KiB of text, which JSON escaping can grow six-fold.
	maxBodyBytes = 1 << 20
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// ErrClosed is Start's error after Close.
var ErrClosed = errors.New("fleet MCP server: closed")

// Server is the fleet MCP server. Its methods are safe for concurrent use.
//
// Each agent gets its own token (Endpoint) and its own *mcp.Server, so the
// sessions an agent opened are known (Revoke closes them) and a worker's
// tool subset can later differ from the coordinator's. The SDK binds every
// session to the token's agent (auth.TokenInfo.UserID): another agent's
// token cannot use it.
type Server struct {
	fleet   Fleet
	log     *slog.Logger
	sdkLog  *slog.Logger
	schemas *mcp.SchemaCache
	handler http.Handler

	// base is cancelled by Close: every agent's context derives from it.
	base   context.Context
	cancel context.CancelFunc

	// mu guards the fields below. It is never held while taking an
	// agent's gate, calling Fleet or serving a request.
	mu      sync.Mutex
	closed  bool
	url     string // "" until Listen
	ln      net.Listener
	httpSrv *http.Server
	agents  map[string]*agent            // by agent id
	tokens  map[[sha256.Size]byte]*agent // by the SHA-256 of the token
	// wg counts what Close waits for besides the agents' calls: the serve
	// loop, connections, HTTP handlers and Revoke's clean-ups. Add is only
	// called with mu held and closed false (see enter), or by the serve
	// loop for a new connection (see connState), so it never races with
	// Close's Wait.
	wg sync.WaitGroup

	closeOnce sync.Once
}

// agent is one agent's grant: its token and the MCP server its sessions
// run on.
type agent struct {
	id    string
	token string
	srv   *mcp.Server
	// ctx is cancelled when the agent is revoked or the Server closes; tool
	// calls of the agent end with it.
	ctx    context.Context
	cancel context.CancelFunc

	// gate orders session creation and tool calls against retirement: a
	// request that may create a session, and a call starting, hold gate for
	// reading; retire takes it for writing to set retired, so no session or
	// call can appear after retire has waited for the calls and closed the
	// sessions.
	gate    sync.RWMutex
	retired bool // guarded by gate
	// calls counts the agent's tool calls in flight; Add only with gate
	// held for reading and retired false.
	calls sync.WaitGroup
}

// New returns a Server; log receives its diagnostics (never a token).
// Listen, then Serve with the Fleet its tools act on (or Start, both at
// once). Endpoint works once Listen succeeded, so a daemon can hand its
// agents their endpoints while it builds the Fleet the tools call.
func New(log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:     log,
		sdkLog:  slog.New(minLevel{log.Handler(), slog.LevelWarn}),
		schemas: mcp.NewSchemaCache(),
		base:    base,
		cancel:  cancel,
		agents:  make(map[string]*agent),
		tokens:  make(map[[sha256.Size]byte]*agent),
	}
	sdk := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: maxBodyBytes,
		Logger:              s.sdkLog,
	})
	requireToken := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		// The tokens are the daemon's own and live as long as the agent.
		AllowMissingExpiration: true,
	})
	mux := http.NewServeMux()
	mux.Handle(Path, s.track(requireToken(s.gate(sdk))))
	s.handler = mux
	return s
}

// Start is Listen and Serve(f).
func (s *Server) Start(f Fleet) error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve(f)
}

// Listen listens on 127.0.0.1 on a port the system picks.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln != nil {
		return errors.New("fleet MCP server: already listening")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fleet MCP server: listen: %w", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String() + Path
	return nil
}

// Serve answers tool calls with f until Close; Listen must have
// succeeded. Connections that arrive before Serve wait in the listen
// queue.
func (s *Server) Serve(f Fleet) error {
	if f == nil {
		panic("fleetmcp: Serve with a nil Fleet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ln == nil {
		return errors.New("fleet MCP server: Serve before Listen")
	}
	if s.httpSrv != nil {
		return errors.New("fleet MCP server: already serving")
	}
	s.fleet = f
	ln := s.ln
	s.httpSrv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         s.connState,
		// No ReadTimeout or WriteTimeout: a tool call waiting on the
		// operator and the standalone SSE stream are long-lived by design.
	}
	srv := s.httpSrv
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fleet MCP server stopped serving", "err", err)
		}
	}()
	s.log.Debug("fleet MCP server listening", "url", s.url)
	return nil
}

// Endpoint returns how agent reaches the server: the URL, the header with
// the agent's token (minted on first use, the same until Revoke) and the
// tool names, which the CLI must pre-allow. Start must have succeeded
// first. After Close the endpoint it returns is refused.
func (s *Server) Endpoint(agentID string) provider.MCPServer {
	if agentID == "" {
		panic("fleetmcp: Endpoint with an empty agent id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.url == "" {
		panic("fleetmcp: Endpoint before Start")
	}
	a := s.agents[agentID]
	if a == nil {
		a = s.newAgent(agentID)
		if !s.closed {
			s.agents[agentID] = a
			s.tokens[sha256.Sum256([]byte(a.token))] = a
		}
	}
	return provider.MCPServer{
		Name:    ServerName,
		URL:     s.url,
		Headers: map[string]string{"Authorization": "Bearer " + a.token},
		Tools:   ToolNames(),
	}
}

// Revoke ends agent's grant: its token is refused from now on, its tool
// calls in flight are cancelled and its sessions closed. It does not wait
// for them (Close does); a later Endpoint mints a new token. A no-op for
// an agent without a token.
func (s *Server) Revoke(agentID string) {
	s.mu.Lock()
	a := s.agents[agentID]
	if a == nil || s.closed {
		s.mu.Unlock()
		return
	}
	delete(s.agents, agentID)
	delete(s.tokens, sha256.Sum256([]byte(a.token)))
	s.wg.Add(1)
	s.mu.Unlock()

	a.cancel()
	go func() {
		defer s.wg.Done()
		a.retire()
	}()
}

// Close stops the server: it refuses new requests, cancels the tool calls
// in flight (their Fleet calls see ctx done), closes every session and the
// listener, and returns once every handler and goroutine of the server has
// ended. Idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(s.close)
	return nil
}

func (s *Server) close() {
	s.mu.Lock()
	s.closed = true
	agents := make([]*agent, 0, len(s.agents))
	for _, a := range s.agents {
		agents = append(agents, a)
	}
	clear(s.agents)
	clear(s.tokens)
	srv := s.httpSrv
	s.mu.Unlock()

	s.cancel()
	for _, a := range agents {
		a.cancel()
	}
	for _, a := range agents {
		a.retire()
	}
	if srv != nil {
		if err := srv.Close(); err != nil {
			s.log.Warn("fleet MCP server: close listener", "err", err)
		}
	}
	s.wg.Wait()
	s.log.Debug("fleet MCP server closed")
}

// retire marks a retired, so that no new session or call can start for it,
// waits for its calls in flight to return (a.ctx must already be
// cancelled), so that their results still reach the client, and then
// closes its sessions.
func (a *agent) retire() {
	a.gate.Lock()
	a.retired = true
	a.gate.Unlock()
	a.calls.Wait()
	for _, ss := range slices.Collect(a.srv.Sessions()) {
		ss.Close()
	}
}

// newAgent mints a token for id and builds its MCP server. s.mu must be
// held.
func (s *Server) newAgent(id string) *agent {
	var b [tokenBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	ctx, cancel := context.WithCancel(s.base)
	a := &agent{id: id, token: hex.EncodeToString(b[:]), ctx: ctx, cancel: cancel}
	a.srv = mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "agents-fleet", Version: "1"}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       s.sdkLog,
		SchemaCache:  s.schemas,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	a.srv.AddReceivingMiddleware(readableErrors)
	s.addTools(a)
	return a
}

// connState counts each connection's goroutine in wg, from StateNew (set
// on the serve loop's goroutine, which wg already counts) to its end, so
// that Close also waits for what net/http does after the last response
// (it lingers up to half a second before closing a connection whose
// request body went unread, as after a 401 or 413).
func (s *Server) connState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.wg.Add(1)
	case http.StateHijacked, http.StateClosed:
		s.wg.Done()
	}
}

// enter registers a request or tool call with wg; false once closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// agentKey is the TokenInfo.Extra key verify stores the caller's grant at.
const agentKey = "fleetmcp.agent"

// verify is the bearer-token check: the token names the agent. The lookup
// is by the token's hash and the comparison constant-time, so timing tells
// nothing about a valid token.
func (s *Server) verify(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	s.mu.Lock()
	a := s.tokens[sum]
	s.mu.Unlock()
	if a == nil || subtle.ConstantTimeCompare([]byte(a.token), []byte(token)) != 1 {
		s.log.Debug("fleet MCP server: unknown token refused", "remote", r.RemoteAddr)
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: a.id, Extra: map[string]any{agentKey: a}}, nil
}

// agentOf returns the grant verify found for r's token, nil if none.
func agentOf(r *http.Request) *agent {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return nil
	}
	a, _ := ti.Extra[agentKey].(*agent)
	return a
}

// serverFor is the SDK's getServer: the MCP server of the token's agent.
func (s *Server) serverFor(r *http.Request) *mcp.Server {
	if a := agentOf(r); a != nil {
		return a.srv
	}
	return nil
}

// track counts an HTTP request in wg, and refuses it once closed.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.enter() {
			http.Error(w, "the fleet MCP server is shutting down", http.StatusServiceUnavailable)
			return
		}
		defer s.wg.Done()
		next.ServeHTTP(w, r)
	})
}

// startCall registers a tool call of a; false once a is retired.
func (a *agent) startCall() bool {
	a.gate.RLock()
	defer a.gate.RUnlock()
	if a.retired {
		return false
	}
	a.calls.Add(1)
	return true
}

// gate holds the agent's gate for reading while a request that may create
// a session (a POST without a session id) is served, and refuses it once
// the agent is retired. Such a request is short: it carries the initialize
// handshake, not a tool call.
func (s *Server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		a := agentOf(r)
		if a == nil { // cannot happen behind RequireBearerToken
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		a.gate.RLock()
		defer a.gate.RUnlock()
		if a.retired {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// minLevel is a slog.Handler that drops records below min: the SDK logs
// every session's start and end at info.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
