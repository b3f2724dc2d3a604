package daemon

import (
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/remote"
)

// openHosts starts the hosts hub when the fleet listens for worker hosts
// (--hosts-listen, hosts.listen): an embedded NATS server with JetStream
// and a TLS leaf-node listener (docs/hosts.md), and the remote side of the
// workers placed on hosts. Without it nothing of NATS runs.
func (f *fleet) openHosts() error {
	addr := f.o.Switches.HostsListen
	if addr == "" {
		return nil
	}
	hub, err := hosts.StartHub(hosts.HubConfig{
		Dir:       hosts.Dir(f.o.Home),
		Listen:    addr,
		Advertise: f.o.File.Hosts.Advertise,
		Lease:     f.o.File.HostsLease(),
		Logger:    f.log.With("component", "hosts"),
		OnChange: func() {
			// The hub reports changes before the engine exists; placement
			// looks at the hosts afresh whenever it dispatches anyway.
			if e := f.hostsEngine.Load(); e != nil {
				e.HostsChanged()
			}
		},
	})
	if err != nil {
		return err
	}
	f.onClose(hub.Close)
	f.hosts = hub
	f.remote = remote.New(remote.Config{Hub: hub, Lease: f.o.File.HostsLease(), Logger: f.log.With("component", "remote")})
	f.onClose(f.remote.Close) // before the hub's: the loops use its connections
	if hub.Advertise() == "" {
		f.log.Warn("listening for hosts on every address: `fleet hosts add` needs the address hosts dial (hosts.advertise, or --advertise)", "listen", hub.ListenAddr())
	}
	return nil
}

// engineHosts is the engine's view of the hosts: nil (every worker here)
// unless the fleet listens for hosts.
func (f *fleet) engineHosts() engine.Hosts {
	if f.remote == nil {
		return nil
	}
	return f.remote
}
