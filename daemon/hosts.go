package daemon

import (
	"github.com/agents-fleet/fleet/hosts"
)

// openHosts starts the hosts hub when the fleet listens for worker hosts
// (--hosts-listen, hosts.listen): an embedded NATS server with JetStream
// and a TLS leaf-node listener (docs/hosts.md). Without it nothing of
// NATS runs.
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
	})
	if err != nil {
		return err
	}
	f.onClose(hub.Close)
	f.hosts = hub
	if hub.Advertise() == "" {
		f.log.Warn("listening for hosts on every address: `fleet hosts add` needs the address hosts dial (hosts.advertise, or --advertise)", "listen", hub.ListenAddr())
	}
	return nil
}
