package hoststest

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/agents-fleet/fleet/hosts"
)

// LeafConn is a leaf-node connection made by hand: TLS, then a CONNECT
// signed with a host's seed, then raw protocol lines. What the hub does
// with it is what it does with any program holding the credential.
type LeafConn struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

// DialLeaf dials the hub of j as j's host would and signs the nonce with
// seed (j.Seed for the host's own credential); fields are added to the
// CONNECT (nil: none). It returns the first line the hub answers the
// CONNECT and a PING with: "PONG" when it took the connection, an -ERR
// when it did not.
func DialLeaf(t testing.TB, j hosts.JoinFile, seed string, fields map[string]any) (*LeafConn, string) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", j.Hub, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	// The hub says INFO in the clear, then the connection turns TLS.
	line, err := bufio.NewReader(raw).ReadString('\n')
	if err != nil {
		t.Fatalf("read INFO: %v", err)
	}
	var info struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	host, _, _ := net.SplitHostPort(j.Hub)
	tc, err := hosts.ClientTLS([]byte(j.CA), host)
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, tc)
	if err := conn.Handshake(); err != nil {
		t.Fatalf("TLS: %v", err)
	}
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	sig, _ := kp.Sign([]byte(info.Nonce))
	c := map[string]any{"nkey": pub, "sig": base64.RawURLEncoding.EncodeToString(sig),
		"name": "raw-" + j.Name, "headers": true, "tls_required": true}
	maps.Copy(c, fields)
	connect, _ := json.Marshal(c)
	l := &LeafConn{t: t, conn: conn, r: bufio.NewReader(conn)}
	l.Send("CONNECT " + string(connect))
	l.Send("PING")
	return l, l.Next()
}

// Send writes one protocol line.
func (l *LeafConn) Send(line string) {
	l.t.Helper()
	if _, err := fmt.Fprintf(l.conn, "%s\r\n", line); err != nil {
		l.t.Fatalf("send %q: %v", line, err)
	}
}

// Next is the next line from the hub that is neither INFO, PING nor a
// subscription it forwards (LS+/LS-), answering PINGs; "" when the
// connection closed.
func (l *LeafConn) Next() string {
	l.t.Helper()
	for {
		line, err := l.r.ReadString('\n')
		if err != nil {
			return ""
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "PING":
			l.Send("PONG")
		case strings.HasPrefix(line, "INFO "), strings.HasPrefix(line, "LS+ "), strings.HasPrefix(line, "LS- "):
		default:
			return line
		}
	}
}

// Close closes the connection.
func (l *LeafConn) Close() { l.conn.Close() }
