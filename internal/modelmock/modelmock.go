// Package modelmock is a scripted model API endpoint for tests: it speaks
// enough of the Anthropic Messages API and the OpenAI Responses API for the
// real agent CLIs (Claude Code, Codex, Copilot) to run against it, and it
// only ever listens on a loopback address.
//
// A Script decides the answers. The server keeps no conversation state:
// each request is routed by its latest user prompt and by how many rounds of
// tool results follow that prompt, so several sessions of several CLIs can
// share one server. Every request is logged (Requests).
package modelmock

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running endpoint. Its methods are safe for concurrent use.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	url    string
	ctx    context.Context // canceled by Close: ends every wait and stream
	cancel context.CancelFunc
	served chan struct{} // closed when Serve has returned

	mu       sync.Mutex
	script   Script
	answered map[string]int // requests answered per rule and turn, for Turn.Times
	reqs     []Request
	closed   bool
	handlers sync.WaitGroup // handlers in flight; Add only under mu while !closed

	closeOnce sync.Once

	toolSeq, callSeq, itemSeq atomic.Int64
}

// Request is one logged request.
type Request struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"` // URL path, without the query
	API    string    `json:"api"`  // "anthropic" | "openai" | "" (other)
	Rule   string    `json:"rule"` // name of the rule that answered, "" for default
	// Turn is the turn index the request was routed with: the number of
	// model requests answered since its prompt (the rule answered with
	// Turns[min(Turn, len(Turns)-1)]).
	Turn    int         `json:"turn"`
	Model   string      `json:"model"`
	Headers http.Header `json:"headers"`
	// Body is the request body: the JSON as sent, or, when it is larger
	// than 1 MiB or not JSON, a JSON string holding its first 1 MiB.
	Body json.RawMessage `json:"body"`
	// Status is the HTTP status answered; 0 when nothing was answered
	// (a Hang or Delay ended by Close or by the client going away).
	Status int `json:"status"`
}

const (
	maxBody    = 16 << 20 // request bodies larger than this are refused
	maxLogBody = 1 << 20  // request bodies are logged up to this size
)

// Start listens on 127.0.0.1 on a free port and serves script.
func Start(script Script) (*Server, error) {
	return StartAddr("127.0.0.1:0", script)
}

// StartAddr is Start on a given loopback address such as "127.0.0.1:18080"
// ("localhost" means 127.0.0.1; other hosts are refused).
func StartAddr(addr string, script Script) (*Server, error) {
	addr, err := loopbackAddr(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("modelmock: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		ln:     ln,
		url:    "http://" + ln.Addr().String(),
		ctx:    ctx,
		cancel: cancel,
		served: make(chan struct{}),
		script: script,
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.handle),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.served)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// loopbackAddr checks that addr ("host:port") names a loopback address and
// returns it with "localhost" replaced by 127.0.0.1.
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("modelmock: address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return "", fmt.Errorf("modelmock: refusing to listen on %q: only loopback addresses (127.0.0.1, ::1) are allowed", addr)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// URL is the server's base URL, "http://127.0.0.1:PORT" (no trailing slash
// and no /v1: ANTHROPIC_BASE_URL takes it as it is, Codex's base_url wants
// URL()+"/v1").
func (s *Server) URL() string { return s.url }

// Close stops listening, ends in-flight streams, delays and hangs, and
// waits for every handler to return. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.srv.Shutdown(ctx)
		cancel()
		if err != nil {
			// A client still sending its request body: cut it off.
			s.srv.Close()
		}
		s.handlers.Wait()
		<-s.served
	})
	return nil
}

// Requests returns a copy of the request log, in arrival order. The
// entries' Headers and Body are shared with the log: treat them as
// read-only.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// SetScript replaces the script; requests that arrive afterwards are
// answered from it.
func (s *Server) SetScript(script Script) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

func (s *Server) currentScript() Script {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.script
}

// update changes log entry i.
func (s *Server) update(i int, f func(*Request)) {
	s.mu.Lock()
	f(&s.reqs[i])
	s.mu.Unlock()
}

// exchange is one request being answered.
type exchange struct {
	s   *Server
	w   *statusWriter
	r   *http.Request
	log int // index in s.reqs
}

func (s *Server) handle(rw http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		rw.Header().Set("Connection", "close")
		http.Error(rw, "modelmock: closed", http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.reqs = append(s.reqs, Request{
		Time:    time.Now(),
		Method:  r.Method,
		Path:    r.URL.Path,
		Headers: r.Header.Clone(),
	})
	x := &exchange{s: s, w: &statusWriter{ResponseWriter: rw}, r: r, log: len(s.reqs) - 1}
	s.mu.Unlock()
	defer s.handlers.Done()
	defer func() {
		x.s.update(x.log, func(q *Request) { q.Status = x.w.status })
	}()

	path := r.URL.Path
	switch {
	case path == "/v1/messages" && r.Method == http.MethodPost:
		x.api("anthropic")
		x.anthropicMessages()
	case path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		x.api("anthropic")
		x.countTokens()
	case (path == "/v1/responses" || path == "/responses") && r.Method == http.MethodPost:
		x.api("openai")
		x.openaiResponses()
	case (path == "/v1/models" || path == "/models") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		x.models()
	case path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		x.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		x.w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			io.WriteString(x.w, "modelmock\n")
		}
	default:
		x.body() // logged like any other
		x.writeJSON(http.StatusNotFound, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "not_found_error", "message": fmt.Sprintf("modelmock: no route for %s %s", r.Method, path)},
		})
	}
}

func (x *exchange) api(name string) {
	x.s.update(x.log, func(q *Request) { q.API = name })
}

func (x *exchange) routed(rule string, turn int, model string) {
	x.s.update(x.log, func(q *Request) { q.Rule, q.Turn, q.Model = rule, turn, model })
}

// body reads and logs the request body (gzip-decoded when so encoded). It
// fails for bodies over maxBody and for encodings it cannot read.
func (x *exchange) body() ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(x.w, x.r.Body, maxBody)
	switch enc := strings.ToLower(strings.TrimSpace(x.r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = io.LimitReader(zr, maxBody+1)
	default:
		io.Copy(io.Discard, rd)
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	b, err := io.ReadAll(rd)
	if err == nil && len(b) > maxBody {
		err = fmt.Errorf("request body larger than %d bytes", maxBody)
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		err = fmt.Errorf("request body larger than %d bytes", maxBody)
		// Read on a little, so that a client still sending gets the
		// answer rather than a reset connection.
		io.CopyN(io.Discard, x.r.Body, maxBody)
	}
	logged := loggedBody(b)
	x.s.update(x.log, func(q *Request) { q.Body = logged })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// loggedBody is b as the log keeps it: always valid JSON.
func loggedBody(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if len(b) <= maxLogBody && json.Valid(b) {
		return append(json.RawMessage(nil), b...)
	}
	return mustJSON(string(b[:min(len(b), maxLogBody)]))
}

// wait waits d, or forever when hang. It ends early when the server closes
// or the client goes away, and then drops the connection (abort) rather
// than let net/http send an empty 200.
func (x *exchange) wait(d time.Duration, hang bool) {
	ctx := x.r.Context() // canceled by Close too (BaseContext)
	if hang {
		<-ctx.Done()
		abort()
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		abort()
	}
}

func (x *exchange) writeJSON(status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"modelmock: cannot encode the answer"}}`)
	}
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	x.w.WriteHeader(status)
	x.w.Write(b)
	x.w.Write([]byte("\n"))
}

// sse writes Server-Sent Events and flushes each one.
type sse struct {
	w   *statusWriter
	ctx context.Context
	err error
}

func (x *exchange) startSSE(requestIDHeader, requestID string) *sse {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set(requestIDHeader, requestID)
	x.w.WriteHeader(http.StatusOK)
	return &sse{w: x.w, ctx: x.r.Context()}
}

// event writes one event; after a write error or once the request is
// canceled it writes nothing more.
func (e *sse) event(name string, data any) {
	if e.err != nil {
		return
	}
	if e.err = e.ctx.Err(); e.err != nil {
		return
	}
	b, err := marshal(data)
	if err != nil {
		e.err = err
		return
	}
	e.raw("event: " + name + "\ndata: " + string(b) + "\n\n")
}

func (e *sse) raw(s string) {
	if e.err != nil {
		return
	}
	if _, e.err = io.WriteString(e.w, s); e.err == nil {
		e.err = http.NewResponseController(e.w).Flush()
	}
}

// end finishes a stream: one cut short (write error, Close, client gone)
// drops the connection instead of ending the response cleanly.
func (e *sse) end() {
	if e.err != nil {
		abort()
	}
}

// abort drops the connection without ending the response properly (no
// terminating chunk), the way a broken upstream does. net/http recovers
// http.ErrAbortHandler quietly; the handler's deferred log update runs.
func abort() { panic(http.ErrAbortHandler) }

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// models answers GET /v1/models in a shape both Anthropic and OpenAI
// clients read.
func (x *exchange) models() {
	ids := []string{"claude-sonnet-4-5", "claude-opus-4-8", "gpt-5.5", "modelmock"}
	data := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		data = append(data, map[string]any{
			"id": id, "type": "model", "object": "model", "display_name": id,
			"created": 0, "created_at": "2025-01-01T00:00:00Z", "owned_by": "modelmock",
		})
	}
	x.writeJSON(http.StatusOK, map[string]any{
		"object": "list", "data": data, "has_more": false, "first_id": ids[0], "last_id": ids[len(ids)-1],
	})
}

// countTokens answers /v1/messages/count_tokens with a rough estimate.
func (x *exchange) countTokens() {
	b, err := x.body()
	if err == nil {
		var r anthropicRequest
		if r, err = parseAnthropic(b); err == nil {
			x.routed("", 0, r.Model)
		}
	}
	if err != nil {
		x.anthropicError(http.StatusBadRequest, "modelmock: "+err.Error())
		return
	}
	x.writeJSON(http.StatusOK, map[string]any{"input_tokens": max(1, len(b)/4)})
}

// marshalInput is a tool call's input as JSON; nil is {}.
func marshalInput(in any) (json.RawMessage, error) {
	if in == nil {
		return json.RawMessage(`{}`), nil
	}
	b, err := marshal(in)
	if err != nil {
		return nil, fmt.Errorf("tool call input: %w", err)
	}
	return b, nil
}

// marshal is json.Marshal without HTML escaping: a command "echo hi > x"
// reaches the CLI as written, not as "echo hi \u003e x".
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func forcedMessage(t Turn) string {
	if t.ErrorMessage != "" {
		return t.ErrorMessage
	}
	return fmt.Sprintf("modelmock forced status %d", t.Status)
}

// count counts one more request routed to key and returns the count.
func (s *Server) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answered == nil {
		s.answered = map[string]int{}
	}
	s.answered[key]++
	return s.answered[key]
}
