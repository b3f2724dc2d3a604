package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/registry"
)

// The hub answers fleet hub status on statusAddr: <fleetHome>/hub/hub.sock
// (0600 in the 0700 hub dir), on Windows a user-only named pipe; one JSON
// Status per connection, then close. It carries no secrets.

// Status is what fleet hub status shows.
type Status struct {
	PID       int            `json:"pid"`
	StartedAt int64          `json:"startedAt"`
	FleetHome string         `json:"fleetHome"`
	Verbosity string         `json:"verbosity"`
	Chats     []int64        `json:"allowedChatIds"`
	Fleets    []FleetStatus  `json:"fleets"`
	Telegram  TelegramHealth `json:"telegram"`
	Outbox    OutboxStats    `json:"outbox"`
}

// FleetStatus is one fleet the hub knows.
type FleetStatus struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Cwd     string `json:"cwd"`
	PID     int    `json:"pid"`
	State   string `json:"state"`
	Detail  string `json:"detail,omitempty"`
	Pending int    `json:"pendingRequests"`
	Native  bool   `json:"native,omitempty"`
}

// TelegramHealth is the Bot API link's health.
type TelegramHealth struct {
	Healthy     bool   `json:"healthy"`
	Deaf        bool   `json:"deaf"`     // getUpdates has not succeeded for a while
	Conflict    bool   `json:"conflict"` // 409: another poller or a webhook
	LastPoll    int64  `json:"lastPoll,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	LastErrorAt int64  `json:"lastErrorAt,omitempty"`
	Polls       int64  `json:"polls"`
	Failures    int64  `json:"failuresInARow"`
}

// OutboxStats counts what the hub sent.
type OutboxStats struct {
	Sent       int64 `json:"sent"`
	Edited     int64 `json:"edited"`
	Dropped    int64 `json:"dropped"`
	RetryAfter int64 `json:"retryAfter"`
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// publish refreshes the snapshot the status socket serves.
func (h *hub) publish() {
	hl := h.bot.Health()
	st := h.out.Stats()
	s := &Status{
		PID: os.Getpid(), StartedAt: h.start.UnixMilli(), FleetHome: h.cfg.FleetHome,
		Verbosity: h.cfg.Verbosity.String(), Chats: h.cfg.AllowedChats, Fleets: []FleetStatus{},
		Telegram: TelegramHealth{
			Healthy: !h.deaf && !hl.Conflict && hl.Failures == 0 && !hl.LastPoll.IsZero(),
			Deaf:    h.deaf, Conflict: hl.Conflict, LastPoll: ms(hl.LastPoll), LastError: hl.LastError,
			LastErrorAt: ms(hl.LastErrorAt), Polls: hl.Polls, Failures: hl.Failures,
		},
		Outbox: st,
	}
	for _, f := range h.sortedFleets() {
		s.Fleets = append(s.Fleets, FleetStatus{
			ID: f.d.ID, Name: f.d.Name, Cwd: f.d.Cwd, PID: f.d.PID, State: f.state, Detail: f.detail,
			Pending: len(f.requests), Native: f.native.known,
		})
	}
	h.snap.Store(s)
}

func (h *hub) statusSnapshot() *Status { return h.snap.Load() }

// listenStatus binds the status socket of the hub dir; the caller holds
// the hub lock, so a socket left there is a dead hub's (controlsock.Listen
// probes it and removes it).
func listenStatus(dir string) (net.Listener, error) {
	addr := statusAddr(dir)
	if err := registry.CheckSocketPath(addr); err != nil {
		return nil, err
	}
	ln, err := controlsock.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("hub status socket: %w", err)
	}
	return ln, nil
}

// serveStatus answers each connection with the snapshot until ctx is done.
// Closing the listener removes its socket.
func serveStatus(ctx context.Context, ln net.Listener, snap func() *Status, log *slog.Logger) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("hub status socket", "err", err)
			}
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		json.NewEncoder(c).Encode(snap())
		c.Close()
	}
}

// ErrNoHub is returned by QueryStatus when no hub runs for the fleetHome.
var ErrNoHub = errors.New("no fleet hub is running")

// QueryStatus asks the running hub of fleetHome for its status.
func QueryStatus(ctx context.Context, fleetHome string) (*Status, error) {
	path := statusAddr(Dir(fleetHome))
	c, err := controlsock.Dial(ctx, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w for %s (no status socket at %s)", ErrNoHub, fleetHome, path)
		}
		return nil, fmt.Errorf("hub status: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var s Status
	if err := json.NewDecoder(io.LimitReader(c, 8<<20)).Decode(&s); err != nil {
		return nil, fmt.Errorf("hub status: %w", err)
	}
	return &s, nil
}
