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
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// SubjectPrefix starts every subject of the hosts protocol.
const SubjectPrefix = "fleet.host."

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	labelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// Bounds of what a host is enrolled with and reports.
const (
	MinSlots     = 1
	MaxSlots     = 256
	DefaultSlots = 4
	MaxLabels    = 32
)

// CheckName says whether name can name a host: it becomes a subject token,
// an account and a bucket name, so it is 1-63 of a-z, 0-9 and '-', not
// starting with '-'.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("host name %q: use 1-63 lower-case letters, digits and '-', starting with a letter or digit", name)
	}
	return nil
}

// CheckSlots bounds a host's slots.
func CheckSlots(n int) error {
	if n < MinSlots || n > MaxSlots {
		return fmt.Errorf("slots must be between %d and %d, got %d", MinSlots, MaxSlots, n)
	}
	return nil
}

// ParseLabels splits a comma-separated list ("gpu,big") into checked,
// de-duplicated labels; "" is none.
func ParseLabels(list string) ([]string, error) {
	var out []string
	for l := range strings.SplitSeq(list, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out, CheckLabels(out)
}

// CheckLabels checks labels as ParseLabels makes them.
func CheckLabels(labels []string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("at most %d labels, got %d", MaxLabels, len(labels))
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return fmt.Errorf("label %q: use 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit", l)
		}
	}
	return nil
}

// Subject is the subject of one of host name's messages: Subject("h1",
// "hb") is fleet.host.h1.hb. Everything of a host is under
// fleet.host.<name>.>.
func Subject(name string, tokens ...string) string {
	return SubjectPrefix + name + "." + strings.Join(tokens, ".")
}

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
