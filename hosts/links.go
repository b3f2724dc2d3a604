package hosts

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// sync applies hosts.json when its generation is not the one applied:
// the watcher calls it on every change of the hosts directory.
func (h *Hub) sync() {
	reg, err := LoadRegistry(h.cfg.Dir)
	if err != nil {
		h.log.Warn("hosts.json is unreadable; the hub keeps the hosts it has", "err", err)
		return
	}
	h.mu.Lock()
	same := reg.Generation == h.applied
	h.mu.Unlock()
	if same {
		return
	}
	if err := h.apply(reg); err != nil {
		h.log.Error("hosts: applying hosts.json", "generation", reg.Generation, "err", err)
	}
}

// apply makes the hub serve reg's hosts: a removed host's data is deleted
// and its credential stops working, and a connected one is cut off; an
// added one gets its account. A host removed and enrolled again (a new
// credential under the name) is both. Only the watcher goroutine (and
// StartHub, before it) calls it.
func (h *Hub) apply(reg Registry) error {
	h.mu.Lock()
	var gone []*hostLink
	keys := make(map[string]nkeys.KeyPair, len(reg.Hosts))
	fresh := map[string]nkeys.KeyPair{}
	for name, l := range h.links {
		if now, ok := reg.Find(name); ok && now.NKey == l.host.NKey {
			keys[name] = l.key
		} else {
			gone = append(gone, l)
		}
	}
	h.mu.Unlock()
	for _, host := range reg.Hosts {
		if keys[host.Name] == nil {
			k, err := nkeys.CreateUser()
			if err != nil {
				return err
			}
			keys[host.Name], fresh[host.Name] = k, k
		}
	}
	var errs []error
	// A removed host's streams go while its account is there to hold them.
	for _, l := range gone {
		if err := h.dropData(l); err != nil {
			errs = append(errs, fmt.Errorf("host %s: delete its data: %w", l.name, err))
		}
		l.close()
	}
	// The accounts change only when a host comes or goes; a drain changes
	// nothing the server knows.
	if len(gone) > 0 || len(fresh) > 0 {
		opts, err := h.options(reg, keys)
		if err != nil {
			return err
		}
		if err := h.srv.ReloadOptions(opts); err != nil {
			return fmt.Errorf("hosts hub: reload: %w", err)
		}
		h.relink(keys, fresh)
	}
	for _, l := range gone {
		// The credential is gone; so goes a connection made with it.
		h.cutOff(l.name)
		if _, again := reg.Find(l.name); !again {
			if err := os.RemoveAll(filepath.Join(h.cfg.Dir, jetstreamDir, AccountName(l.name))); err != nil {
				errs = append(errs, err)
			}
		}
		h.mu.Lock()
		delete(h.links, l.name)
		h.mu.Unlock()
		l.key.Wipe()
		h.log.Info("host removed", "host", l.name)
	}
	for _, host := range reg.Hosts {
		k := fresh[host.Name]
		if k == nil {
			continue
		}
		l, err := h.openLink(host, k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.mu.Lock()
		h.links[host.Name] = l
		h.mu.Unlock()
	}
	h.mu.Lock()
	for _, host := range reg.Hosts {
		if l := h.links[host.Name]; l != nil {
			l.host = host
		}
	}
	if len(errs) == 0 {
		h.applied = reg.Generation
	}
	h.mu.Unlock()
	h.writeStatus()
	if h.cfg.OnChange != nil {
		h.cfg.OnChange()
	}
	return errors.Join(errs...)
}

// relink cuts off the leaf connections of the hosts that stay enrolled
// through a reload of the accounts: nats-server re-checks client
// connections on a reload but not leaf ones, whose JetStream and request
// interest is then stale (their JetStream API requests get no responders).
// They dial again within about a second and start afresh; their outboxes
// resend what was in flight, and the fleet's requests are retried.
func (h *Hub) relink(keys, fresh map[string]nkeys.KeyPair) {
	for name := range keys {
		if fresh[name] == nil {
			for _, addr := range h.disconnect(name) {
				h.log.Info("host relinked: the hub's accounts changed", "host", name, "address", addr)
			}
		}
	}
}

// openLink connects the fleet into host's account and listens for its
// heartbeats.
func (h *Hub) openLink(host Host, key nkeys.KeyPair) (*hostLink, error) {
	// The answers to the fleet's requests come to inboxes under the host's
	// own subjects: the host may publish nowhere else (hostPermissions).
	nc, err := h.connect(AccountName(host.Name), key, nats.CustomInboxPrefix(InboxPrefix(host.Name)))
	if err != nil {
		return nil, err
	}
	l := &hostLink{name: host.Name, key: key, nc: nc, host: host, seen: h.prev[host.Name], state: StateNeverJoined}
	if l.seen.LastSeenMs != 0 {
		l.state = StateLost
	}
	l.seen.Name = host.Name
	if _, err := nc.Subscribe(HeartbeatSubject(host.Name), func(m *nats.Msg) { h.onHeartbeat(l, m) }); err != nil {
		nc.Close()
		return nil, fmt.Errorf("host %s: %w", host.Name, err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("host %s: %w", host.Name, err)
	}
	return l, nil
}

// close closes the fleet's connection into the host's account.
func (l *hostLink) close() {
	if l.nc != nil {
		l.nc.Close()
	}
}

// dropData deletes the streams (and so the buckets) of l's account and
// turns its JetStream off, so a host enrolled again under the name starts
// empty.
func (h *Hub) dropData(l *hostLink) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(l.nc)
	if err != nil {
		return err
	}
	names := js.StreamNames(ctx)
	var list []string
	for n := range names.Name() {
		list = append(list, n)
	}
	if err := names.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return err
	}
	for _, n := range list {
		if err := js.DeleteStream(ctx, n); err != nil {
			return fmt.Errorf("stream %s: %w", n, err)
		}
	}
	acc, err := h.srv.LookupAccount(AccountName(l.name))
	if err != nil {
		return err
	}
	if acc.JetStreamEnabled() {
		return acc.DisableJetStream()
	}
	return nil
}

// leafs are the leaf connections bound to host name's account, newest
// last.
func (h *Hub) leafs(name string) []*server.LeafInfo {
	lz, err := h.srv.Leafz(&server.LeafzOptions{Account: AccountName(name)})
	if err != nil || lz == nil {
		return nil
	}
	slices.SortFunc(lz.Leafs, func(a, b *server.LeafInfo) int { return cmp.Compare(a.ID, b.ID) })
	return lz.Leafs
}

// cutOff closes every leaf connection of host name.
func (h *Hub) cutOff(name string) {
	for _, addr := range h.disconnect(name) {
		h.log.Info("host cut off", "host", name, "address", addr)
	}
}

// disconnect closes host name's leaf connections and returns where they
// came from.
func (h *Hub) disconnect(name string) []string {
	var out []string
	for _, li := range h.leafs(name) {
		if err := h.srv.DisconnectClientByID(li.ID); err == nil {
			out = append(out, li.IP)
		}
	}
	return out
}

// onHeartbeat records a heartbeat of l's host and answers it. A heartbeat
// that does not decode is refused and counts for nothing.
func (h *Hub) onHeartbeat(l *hostLink, m *nats.Msg) {
	hb, err := DecodeHeartbeat(m.Data)
	if err != nil {
		h.log.Warn("host sent a bad heartbeat", "host", l.name, "err", err)
		return
	}
	addr := ""
	if ls := h.leafs(l.name); len(ls) > 0 {
		addr = ls[len(ls)-1].IP
	}
	now := time.Now()
	h.mu.Lock()
	l.seen = Seen{Name: l.name, LastSeenMs: now.UnixMilli(), Address: addr, Slots: hb.Slots, Labels: hb.Labels,
		Providers: hb.Providers, Running: hb.Running, Instance: hb.Instance, Version: hb.Version}
	ack := Ack{LeaseMs: h.cfg.Lease.Milliseconds(), Draining: l.host.Draining}
	h.mu.Unlock()
	h.dirty.Store(true)
	if m.Reply != "" {
		data, _ := json.Marshal(ack)
		if err := m.Respond(data); err != nil {
			h.log.Debug("heartbeat ack", "host", l.name, "err", err)
		}
	}
}

// view is what this hub judges its hosts' states by.
func (h *Hub) view() hubView {
	return hubView{live: true, lease: h.cfg.Lease, started: h.started.UnixMilli()}
}

// Hosts is every host the hub serves, with its state now.
func (h *Hub) Hosts() []HostStatus {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HostStatus, 0, len(h.links))
	for _, l := range h.links {
		out = append(out, h.view().status(l.host, l.seen, now))
	}
	slices.SortFunc(out, func(a, b HostStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Conn is the fleet's connection into host name's account (nil for a
// host the hub does not serve): where the fleet uses the host's streams
// and buckets.
func (h *Hub) Conn(name string) *nats.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.links[name]; l != nil {
		return l.nc
	}
	return nil
}

// statusSettle is how often the status writer looks: heartbeats reach
// status.json within it, and a lost host is logged within it.
const statusSettle = time.Second

// statusLoop writes status.json when heartbeats changed it, and logs each
// host's changes of state, until the hub closes.
func (h *Hub) statusLoop() {
	tick := time.NewTicker(statusSettle)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
			if h.logStates() && h.cfg.OnChange != nil {
				h.cfg.OnChange()
			}
			if h.dirty.Swap(false) {
				h.writeStatus()
			}
		}
	}
}

// logStates logs the hosts whose state changed since last logged, and
// reports whether any did.
func (h *Hub) logStates() bool {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, l := range h.links {
		s := h.view().state(l.host, l.seen, now)
		if s == l.state {
			continue
		}
		changed = true
		switch s {
		case StateUp:
			h.log.Info("host up", "host", l.name, "address", l.seen.Address, "slots", l.seen.Slots, "providers", len(l.seen.Providers))
		case StateLost:
			h.log.Warn("host lost: no heartbeat within the lease", "host", l.name, "lease", h.cfg.Lease, "lastSeen", time.UnixMilli(l.seen.LastSeenMs).Format(time.RFC3339))
		case StateDraining:
			h.log.Info("host draining", "host", l.name)
		}
		l.state = s
	}
	return changed
}

// statusLocked is status.json now; h.mu must be held.
func (h *Hub) statusLocked() Status {
	st := Status{PID: os.Getpid(), StartedMs: h.started.UnixMilli(), Applied: h.applied, Listen: h.ListenAddr(), Advertise: h.cfg.Advertise,
		LeaseMs: h.cfg.Lease.Milliseconds(), Hosts: make([]Seen, 0, len(h.links))}
	for _, l := range h.links {
		st.Hosts = append(st.Hosts, l.seen)
	}
	slices.SortFunc(st.Hosts, func(a, b Seen) int { return cmp.Compare(a.Name, b.Name) })
	return st
}

// writeStatus writes status.json when it changed (serialised: apply and
// the status loop both write it). Writing it alone would wake the hub's
// own watcher.
func (h *Hub) writeStatus() {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	h.mu.Lock()
	st := h.statusLocked()
	h.mu.Unlock()
	data, err := encodeStatus(st)
	if err != nil || bytes.Equal(data, h.written) {
		return
	}
	if err := writeFileAtomic(filepath.Join(h.cfg.Dir, statusFile), data); err != nil {
		h.log.Warn("hosts status", "err", err)
		return
	}
	h.written = data
}
