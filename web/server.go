// Package web is `fleet web`: the operator console in a browser. It is one
// more client of the fleets' control sockets, like the TUI and the Telegram
// hub. The server holds one control-socket connection per fleet a page
// shows (a follower, which re-attaches when the fleet restarts), keeps what
// a new page must be replayed (a mirror), and streams frames to each page
// with Server-Sent Events; the page sends prompts and answers back with
// POSTs. The browser never sees a control token.
//
// It listens on loopback only. A fresh random token, printed once in the
// URL, is traded for an HttpOnly, SameSite=Strict cookie; every request
// needs the cookie and a Host naming the server (against DNS rebinding),
// and every request that changes something an Origin that is the server
// itself.
package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// DefaultAddr is where fleet web listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7420"

// Config is what Serve needs.
type Config struct {
	Addr        string // host:port on loopback; port 0 picks one
	RegistryDir string // where the fleets' descriptors are
	Fleet       string // a fleet to preselect (id or name); optional
	Logger      *slog.Logger
	// Ready, when set, is called with the URL to open (token included)
	// once the server listens.
	Ready func(url string)
}

// cookieName is the session cookie the URL's token is traded for.
const cookieName = "fleet_web"

// ErrNotLoopback is why a bind to another address is refused.
var ErrNotLoopback = errors.New("fleet web listens on loopback only")

// CheckAddr refuses an address that is not on loopback, with what to do
// instead.
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: %w (127.0.0.1, ::1 or localhost). To use it from another machine, forward a port over SSH: ssh -L 7420:127.0.0.1:7420 THIS_HOST, then open the URL there", addr, ErrNotLoopback)
	}
	return nil
}

// server is one fleet web.
type server struct {
	cfg     Config
	log     *slog.Logger
	token   string // traded for the cookie
	session string // the cookie's value
	hosts   map[string]bool
	origins map[string]bool
	fleets  *fleets
}

// Serve runs fleet web until ctx ends.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if err := CheckAddr(cfg.Addr); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("fleet web: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{cfg: cfg, log: cfg.Logger, token: randomHex(32), session: randomHex(32),
		fleets: &fleets{regDir: cfg.RegistryDir, log: cfg.Logger, ctx: ctx, all: map[string]*follower{}}}
	s.allow(ln.Addr().(*net.TCPAddr))
	hs := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	u := url.URL{Scheme: "http", Host: ln.Addr().String(), Path: "/", RawQuery: "token=" + s.token}
	if cfg.Fleet != "" {
		u.RawQuery += "&fleet=" + url.QueryEscape(cfg.Fleet)
	}
	if cfg.Ready != nil {
		cfg.Ready(u.String())
	}
	s.log.Info("fleet web listening", "addr", ln.Addr().String())
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	// Streams end with ctx (BaseContext); the followers' connections too.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	cancel()
	s.fleets.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// allow lists the Host values this server answers to: the address it is
// bound to, and the loopback names with its port.
func (s *server) allow(a *net.TCPAddr) {
	port := fmt.Sprint(a.Port)
	s.hosts = map[string]bool{}
	for _, h := range []string{a.String(), "127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		s.hosts[h] = true
	}
	s.origins = map[string]bool{}
	for h := range s.hosts {
		s.origins["http://"+h] = true
	}
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assetsFS())))
	mux.HandleFunc("GET /api/fleets", s.listFleets)
	mux.HandleFunc("GET /api/fleets/{id}/events", s.events)
	mux.HandleFunc("POST /api/fleets/{id}/send", s.send)
	mux.HandleFunc("POST /api/fleets/{id}/native", s.native)
	return s.guard(mux)
}

// guard checks every request: the Host (DNS rebinding), the cookie (or the
// URL's token, traded for it), and for anything but GET the Origin.
func (s *server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.hosts[r.Host] {
			http.Error(w, "forbidden: this server answers to 127.0.0.1, localhost and ::1 only", http.StatusForbidden)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet {
			if !equal(tok, s.token) {
				http.Error(w, "this link's token is not this server's: use the URL fleet web printed", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(cookieName)
		if err != nil || !equal(c.Value, s.session) {
			http.Error(w, "unauthorized: open the URL fleet web printed (it carries a token)", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.origins[r.Header.Get("Origin")] {
			http.Error(w, "forbidden: a request from another origin", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	data, err := assetsFS().Open("index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer data.Close()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.Copy(w, data)
}

// fleetInfo is a live fleet, for the picker.
type fleetInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Cwd       string `json:"cwd"`
	PID       int    `json:"pid"`
	StartedAt int64  `json:"startedAt"`
}

func (s *server) listFleets(w http.ResponseWriter, r *http.Request) {
	entries, err := registry.Live(s.cfg.RegistryDir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := []fleetInfo{}
	for _, e := range entries {
		out = append(out, fleetInfo{ID: e.ID, Name: e.Name, Cwd: e.Cwd, PID: e.PID, StartedAt: e.StartedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"fleets": out, "preselect": s.cfg.Fleet})
}

// events streams fleet id's frames to the page (Server-Sent Events): the
// replay first, after a reset, then what comes. A page that reconnects
// starts over with a fresh replay, so it shows nothing twice.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	f, err := s.fleets.get(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	sub := f.m.subscribe(f.connState())
	defer f.m.unsubscribe(sub)
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	// Writes are flushed at most every flushEvery: a flood of frames goes
	// out in few writes, and a lone frame waits no longer than that.
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	dirty := false
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.gone:
			return // fell behind: the page reconnects and is replayed
		case <-keepalive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-flush.C:
			fl.Flush()
			dirty = false
		case e := <-sub.ch:
			if err := writeEvent(w, e); err != nil {
				return
			}
			if !dirty {
				dirty = true
				flush.Reset(flushEvery)
			}
		}
	}
}

// flushEvery is how long a page's stream holds what it wrote before it
// flushes it.
const flushEvery = 20 * time.Millisecond

// writeEvent writes e as one SSE event. Frames are single-line JSON.
func writeEvent(w io.Writer, e event) error {
	data := e.data
	if data == nil {
		data = []byte("{}")
	}
	_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.kind, strings.TrimRight(string(data), "\n"))
	return err
}

// maxSend bounds what a page may send in one request.
const maxSend = protocol.MaxFrameSize

// send forwards a frame the page sent to fleet id. Only what an operator's
// console sends is taken: prompt, confirmResponse, askResponse.
func (s *server) send(w http.ResponseWriter, r *http.Request) {
	f, err := s.fleets.get(r.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSend+1))
	if err != nil || len(body) > maxSend {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("over the %d byte limit", maxSend)})
		return
	}
	msg, err := protocol.Decode(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	switch msg.(type) {
	case *protocol.Prompt, *protocol.ConfirmResponse, *protocol.AskResponse:
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("a page may not send %s frames", msg.MessageType())})
		return
	}
	if err := f.send(r.Context(), msg); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"sent": msg.MessageType()})
}

// native sends a native-root request (the body: the request object of a
// nativeRoot frame, docs/native-roots.md) to fleet id and answers with its
// result: 200 {"result": …}. A mutation whose result did not come is
// answered 504 {"uncertain": true}: retry it with the same body (same
// operationId and expectedRevision), which the fleet applies at most once.
func (s *server) native(w http.ResponseWriter, r *http.Request) {
	f, err := s.fleets.get(r.PathValue("id"))
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, protocol.MaxNativeFrameSize+1))
	if err != nil || len(body) > protocol.MaxNativeFrameSize {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("over the %d byte limit of native requests", protocol.MaxNativeFrameSize)})
		return
	}
	req, err := protocol.ParseNativeRequest(body)
	if err == nil {
		err = req.Validate()
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	res, err := f.doNative(r.Context(), *req)
	switch {
	case errors.Is(err, errNativeUncertain):
		writeJSON(w, http.StatusGatewayTimeout, map[string]any{"error": err.Error(), "uncertain": req.OperationID != ""})
	case errors.Is(err, errNotAttached):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"result": res.Result})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
