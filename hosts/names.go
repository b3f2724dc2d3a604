// Package hosts is the fleet's side of worker hosts and what both sides
// share: the host registry (<fleetHome>/hosts/hosts.json), the fleet's own
// certificate authority and the hub's server certificate, join files, the
// hub (an embedded NATS server with JetStream and a TLS leaf-node listener
// that hosts dial), the subjects, and the heartbeat a host sends.
//
// Each host is a NATS account of its own on the hub: its leaf-node
// connection is bound to that account and its credential allows only its
// own subjects there, so a host can neither see nor reach another host's
// traffic or anything of the fleet's (docs/hosts.md, "Security").
package hosts

import (
	"strings"
)

// SubjectPrefix starts every subject of the hosts protocol.
const SubjectPrefix = "fleet.host."

// Subject is the subject of one of host name's messages: Subject("h1",
// "hb") is fleet.host.h1.hb. Everything of a host is under
// fleet.host.<name>.>.
func Subject(name string, tokens ...string) string {
	return SubjectPrefix + name + "." + strings.Join(tokens, ".")
}

// InboxPrefix starts the subjects where the fleet takes the answers to
// its requests to host name: under the host's own subjects, the only ones
// the host may publish to.
func InboxPrefix(name string) string { return Subject(name, "inbox") }

// HeartbeatSubject is where host name sends its heartbeats (a request; the
// fleet answers with an Ack).
func HeartbeatSubject(name string) string { return Subject(name, "hb") }

// accountPrefix starts the name of each host's account on the hub.
const accountPrefix = "host-"

// fleetAccount is the hub's account of the fleet itself. It holds the
// daemon's own user, so the hub always requires authentication (a server
// without users would take any leaf node into its global account).
const fleetAccount = "fleet"

// AccountName is the hub's account of host name.
func AccountName(name string) string { return accountPrefix + name }
