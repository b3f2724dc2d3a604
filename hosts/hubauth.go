package hosts

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Limits of each host's account: how many streams and consumers it may
// hold (the fleet creates the streams; a host only reads and writes them)
// and how many leaf connections its credential may have at once (one, and
// room for stale ones a cut link leaves until the hub's pings time out).
const (
	hostMaxStreams   = 64
	hostMaxConsumers = 1024
	hostMaxLeafs     = 4
)

// The pings of both ends of a host's link (the hub's and the host's leaf
// node): a link that stops answering is closed after about PingInterval ×
// MaxPingsOut, well under the lease, and the host dials again.
const (
	PingInterval = 5 * time.Second
	MaxPingsOut  = 2
)

// LeafCompression is off on both ends of a host's link. nats-server's
// default (s2_auto) holds an S2 writer of about 3.5 MiB per link on each
// side, idle or not, which was most of an idle host's heap; branches
// cross as git packs, compressed already, and an agent's events are small
// next to a link's bandwidth (docs/hosts.md, "Sizing").
var LeafCompression = server.CompressionOpts{Mode: server.CompressionOff}

// hostPermissions are what host name's credential may do in its own
// account: its own subjects, the JetStream API of its account (reading
// and writing the streams and buckets the fleet made for it, not making,
// changing or deleting streams), and inboxes for the answers to its
// requests. Anything else is a permission violation, which the hub
// answers by closing the connection. The account already keeps the host
// from every other host's and the fleet's traffic; these keep it from
// subjects of its own account that are the fleet's to use.
func hostPermissions(name string) *server.Permissions {
	own := Subject(name, ">")
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{own, "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$O.>", "$KV.>"},
			Deny: []string{"$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>",
				"$JS.API.STREAM.RESTORE.>", "$JS.API.ACCOUNT.>"},
		},
		Subscribe: &server.SubjectPermission{Allow: []string{own, "_INBOX.>"}},
		// Answers to the fleet's requests.
		Response: &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
	}
}

// accountsConf is the accounts of the hub in NATS configuration syntax:
// the fleet's own and one per host, with its JetStream and connection
// limits. (Account limits can only be set this way; the users are added to
// the parsed options in code.)
func accountsConf(reg Registry) string {
	var b strings.Builder
	b.WriteString("accounts {\n  \"" + fleetAccount + "\": {}\n")
	for _, h := range reg.Hosts {
		// Names are checked (naming.CheckName): nothing here needs quoting.
		fmt.Fprintf(&b, "  %q: { jetstream: { max_streams: %d, max_consumers: %d }, limits: { max_leafnodes: %d } }\n",
			AccountName(h.Name), hostMaxStreams, hostMaxConsumers, hostMaxLeafs)
	}
	b.WriteString("}\n")
	return b.String()
}

func connectionTypes(t string) map[string]struct{} { return map[string]struct{}{t: {}} }

// options are the hub's server options for reg; keys holds the fleet's
// own credential in each host's account.
func (h *Hub) options(reg Registry, keys map[string]nkeys.KeyPair) (*server.Options, error) {
	o := &server.Options{}
	if err := o.ProcessConfigString(accountsConf(reg)); err != nil {
		return nil, fmt.Errorf("hosts hub accounts: %w", err)
	}
	accs := make(map[string]*server.Account, len(o.Accounts))
	for _, a := range o.Accounts {
		accs[a.Name] = a
	}
	inProcess := func(k nkeys.KeyPair, acc *server.Account) error {
		pub, err := k.PublicKey()
		if err != nil {
			return err
		}
		// The fleet's users take in-process connections only: the server
		// has no client port, and a leaf node cannot pose as the fleet.
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: pub, Account: acc, AllowedConnectionTypes: connectionTypes(jwt.ConnectionTypeInProcess)})
		return nil
	}
	if err := inProcess(h.fleetKey, accs[fleetAccount]); err != nil {
		return nil, err
	}
	for _, host := range reg.Hosts {
		acc := accs[AccountName(host.Name)]
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: host.NKey, Account: acc, Permissions: hostPermissions(host.Name),
			AllowedConnectionTypes: connectionTypes(jwt.ConnectionTypeLeafnode)})
		if err := inProcess(keys[host.Name], acc); err != nil {
			return nil, err
		}
	}
	o.ServerName = "fleet-hub"
	o.DontListen = true
	o.NoSigs = true
	o.JetStream = true
	o.StoreDir = h.cfg.Dir // the server keeps its store in Dir/jetstream
	o.PingInterval = PingInterval
	o.MaxPingsOut = MaxPingsOut
	o.LeafNode.Host = hostOf(h.cfg.Listen)
	o.LeafNode.Port = h.port
	o.LeafNode.TLSConfig = h.tls
	o.LeafNode.TLSTimeout = 5
	// Hosts dial the address in their join file, which the certificate
	// covers; they are told no other.
	o.LeafNode.NoAdvertise = true
	o.LeafNode.Compression = LeafCompression
	return o, nil
}
