package hosts

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/agents-fleet/fleet/internal/lockfile"
	"github.com/agents-fleet/fleet/registry"
)

// HubConfig configures the hub. Dir and Listen are required.
type HubConfig struct {
	Dir string // <fleetHome>/hosts
	// Listen is the leaf-node listener's host:port; port 0 picks a free
	// one (tests).
	Listen string
	// Advertise is the host:port hosts dial, written into join files and
	// covered by the server certificate; "" is Listen when Listen names
	// one host (not a wildcard).
	Advertise string
	Lease     time.Duration // a host not heard from for this long is lost; default DefaultLease
	Logger    *slog.Logger  // default: discard
	// OnChange, when set, is called (on the hub's own goroutine, within
	// about a second) when a host's state changed: up, lost, draining,
	// added or removed. It must not block.
	OnChange func()
}

// Hub is the fleet's end of the hosts: an embedded NATS server with
// JetStream (its store in Dir/jetstream), no client port (the fleet talks
// to it in-process) and a TLS leaf-node listener that hosts dial. Each
// enrolled host is an account of its own, with the host's credential and
// one of the fleet's; the hub follows hosts.json while it runs (a removed
// host is cut off, an added one can join) and writes what it hears from
// hosts into status.json.
type Hub struct {
	cfg     HubConfig
	log     *slog.Logger
	started time.Time
	lock    *lockfile.Lock // hub.lock: one hub per fleet home
	srv     *server.Server
	// tls is the listener's TLS configuration: the same value on every
	// reload, so the server sees no change to it.
	tls  *tls.Config
	port int // the leaf-node listener's port
	// fleetKey is the fleet's own user in the fleet account: with it the
	// server always requires authentication, even with no host enrolled.
	fleetKey nkeys.KeyPair

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the watcher and the status writer
	dirty   atomic.Bool    // a heartbeat changed what status.json says
	writeMu sync.Mutex     // serialises writes of status.json
	written []byte         // status.json as last written; writeMu guards it

	// mu guards links, applied and each link's host, seen and state. The
	// watcher goroutine alone adds and removes links (apply); heartbeat
	// callbacks and the status writer read and update them.
	mu      sync.Mutex
	links   map[string]*hostLink
	applied int64
	// prev is what the previous hub of this fleet home heard from each
	// host (its status.json): a host seen before shows as lost, not as
	// never joined, until it heartbeats again.
	prev map[string]Seen
}

// hostLink is the fleet's connection into one host's account.
type hostLink struct {
	name string
	key  nkeys.KeyPair // the fleet's credential in the host's account
	nc   *nats.Conn

	// guarded by Hub.mu
	host  Host
	seen  Seen
	state State // as last logged
}

// StartHub starts the hub and returns once it listens. Only one fleet per
// fleet home runs it (hub.lock).
func StartHub(cfg HubConfig) (*Hub, error) {
	if cfg.Dir == "" || cfg.Listen == "" {
		return nil, errors.New("hosts hub: Dir and Listen are required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	host, port, err := splitListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.Advertise == "" && host != "" && !isUnspecified(host) && port != 0 {
		cfg.Advertise = cfg.Listen
	}
	if err := ensureDir(cfg.Dir); err != nil {
		return nil, err
	}
	h := &Hub{cfg: cfg, log: cfg.Logger, started: time.Now(), links: map[string]*hostLink{}}
	if h.lock, err = lockfile.TryLock(filepath.Join(cfg.Dir, hubLockName)); err != nil {
		if errors.Is(err, lockfile.ErrBusy) {
			return nil, fmt.Errorf("another fleet in this fleet home listens for hosts (%s is held)", filepath.Join(cfg.Dir, hubLockName))
		}
		return nil, fmt.Errorf("hosts hub: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			h.stop(false)
		}
	}()
	var cover []string
	if host != "" && !isUnspecified(host) {
		cover = append(cover, cfg.Listen)
	}
	if cfg.Advertise != "" {
		cover = append(cover, cfg.Advertise)
	}
	if _, err := EnsurePKI(cfg.Dir, cover...); err != nil {
		return nil, err
	}
	reg, err := LoadRegistry(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := pruneStore(cfg.Dir, reg); err != nil {
		return nil, err
	}
	if h.fleetKey, err = nkeys.CreateUser(); err != nil {
		return nil, err
	}
	// The server starts with the fleet's account alone, and apply brings
	// in the hosts as it does whenever hosts.json changes.
	if err := h.startServer(port); err != nil {
		return nil, err
	}
	h.prev = previousSeen(cfg.Dir, h.log)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := h.apply(reg); err != nil {
		return nil, err
	}
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		registry.Watch(h.ctx, cfg.Dir, 5*time.Second, h.log, func() bool { h.sync(); return true })
	}()
	go func() { defer h.wg.Done(); h.statusLoop() }()
	ok = true
	h.log.Info("listening for hosts", "listen", h.ListenAddr(), "advertise", cfg.Advertise, "hosts", len(reg.Hosts))
	return h, nil
}

// splitListen parses the listen address; port 0 is "any".
func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("hosts listen address %q: want host:port", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("hosts listen address %q: port must be 0-65535", addr)
	}
	return host, port, nil
}

// ListenAddr is where the hub listens for hosts (the port resolved).
func (h *Hub) ListenAddr() string {
	host, _, _ := net.SplitHostPort(h.cfg.Listen)
	return net.JoinHostPort(host, strconv.Itoa(h.port))
}

// Advertise is the address written into join files ("" when the hub
// listens on a wildcard address and none was configured).
func (h *Hub) Advertise() string { return h.cfg.Advertise }

// startServer starts the embedded server, with no hosts, and waits until
// it listens.
func (h *Hub) startServer(port int) error {
	if port == 0 {
		port = -1 // the server's "any free port"
	}
	h.tls = serverTLS(h.cfg.Dir)
	h.port = port
	opts, err := h.options(Registry{}, nil)
	if err != nil {
		return err
	}
	// The server says only that it is not ready when it cannot listen:
	// try the address first for the reason (the port is free again at
	// once; another process could take it in between, and then the wait
	// below fails).
	if port > 0 {
		ln, err := net.Listen("tcp", h.cfg.Listen)
		if err != nil {
			return fmt.Errorf("hosts hub: %w", err)
		}
		ln.Close()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("hosts hub: %w", err)
	}
	srv.SetLoggerV2(ServerLogger(h.log, nil), false, false, false)
	srv.Start()
	h.srv = srv
	if !srv.ReadyForConnections(30 * time.Second) {
		return fmt.Errorf("hosts hub: not listening on %s after 30s (see the log)", h.cfg.Listen)
	}
	// The server wrote the port it took back into its options.
	h.port = opts.LeafNode.Port
	return nil
}

// stop shuts down what StartHub started, in reverse; final writes the last
// status.json before the hub's lock goes (so that it cannot overwrite the
// next hub's).
func (h *Hub) stop(final bool) {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	h.mu.Lock()
	for _, l := range h.links {
		l.close()
		l.key.Wipe()
	}
	h.mu.Unlock()
	if h.srv != nil {
		h.srv.Shutdown()
		h.srv.WaitForShutdown()
	}
	if h.fleetKey != nil {
		h.fleetKey.Wipe()
	}
	if final {
		h.mu.Lock()
		st := h.statusLocked()
		h.mu.Unlock()
		st.PID = 0
		if err := writeStatus(h.cfg.Dir, st); err != nil {
			h.log.Warn("hosts status", "err", err)
		}
	}
	if h.lock != nil {
		h.lock.Release()
	}
}

// Close disconnects every host and stops the hub. status.json keeps what
// was last heard from each host, marked as no longer running, so `fleet
// hosts` shows them lost.
func (h *Hub) Close() { h.stop(true) }

// connect opens an in-process connection into account acc with key.
func (h *Hub) connect(acc string, key nkeys.KeyPair, opts ...nats.Option) (*nats.Conn, error) {
	pub, err := key.PublicKey()
	if err != nil {
		return nil, err
	}
	log := h.log
	opts = append([]nats.Option{
		nats.InProcessServer(h.srv),
		nats.Name("fleet:" + acc),
		nats.Nkey(pub, key.Sign),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("hosts hub connection", "account", acc, "subject", subj, "err", err)
		}),
	}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("hosts hub: connect to account %s: %w", acc, err)
	}
	return nc, nil
}

// pruneStore deletes the JetStream data of accounts of hosts that are no
// longer enrolled (removed while no fleet ran the hub). The server is not
// running yet.
func pruneStore(dir string, reg Registry) error {
	store := filepath.Join(dir, jetstreamDir)
	entries, err := os.ReadDir(store)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hosts store: %w", err)
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), accountPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if _, enrolled := reg.Find(name); !enrolled {
			if err := os.RemoveAll(filepath.Join(store, e.Name())); err != nil {
				return fmt.Errorf("hosts store: %w", err)
			}
		}
	}
	return nil
}

// previousSeen is what the previous hub in dir heard from each host.
func previousSeen(dir string, log *slog.Logger) map[string]Seen {
	st, err := ReadStatus(dir)
	if err != nil {
		log.Warn("the hosts status of the previous run is unreadable; starting afresh", "err", err)
	}
	out := make(map[string]Seen, len(st.Hosts))
	for _, s := range st.Hosts {
		out[s.Name] = s
	}
	return out
}
