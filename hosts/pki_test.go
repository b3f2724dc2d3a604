package hosts_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agents-fleet/fleet/hosts"
)

// serveTLS serves TLS handshakes on loopback with the hub's certificate
// from dir (as the hub does) and returns the address.
func serveTLS(t *testing.T, dir string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", hosts.ServerTLSForTest(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func handshake(addr string, caPEM []byte, serverName string) error {
	cfg, err := hosts.ClientTLS(caPEM, serverName)
	if err != nil {
		return err
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	return c.Close()
}

// TestPKIRoundTrip: a client that trusts only the fleet's CA gets through
// to the hub's certificate; one that trusts another fleet's CA, or asks
// for a name the certificate does not cover, does not. The keys are 0600
// in a 0700 directory.
func TestPKIRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	caPEM, err := hosts.EnsurePKI(dir, "127.0.0.1:7422")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, dir)
	if err := handshake(addr, caPEM, "127.0.0.1"); err != nil {
		t.Fatalf("client trusting the fleet's CA: %v", err)
	}
	otherCA, err := hosts.EnsurePKI(filepath.Join(t.TempDir(), "other"), "127.0.0.1:7422")
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if err := handshake(addr, otherCA, "127.0.0.1"); !errors.As(err, &unknown) {
		t.Fatalf("client trusting another CA: %v, want an unknown authority", err)
	}
	var badName x509.HostnameError
	if err := handshake(addr, caPEM, "10.9.9.9"); !errors.As(err, &badName) {
		t.Fatalf("a name the certificate does not cover: %v, want a hostname error", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("hosts dir: %v %v, want 0700", fi.Mode(), err)
	}
	for _, f := range []string{"ca-key.pem", "server-key.pem", "ca.pem", "server.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want 0600", f, fi.Mode(), err)
		}
	}
}

// TestServerCertFollowsTheAddress: asked to cover a new address, the PKI
// issues a server certificate for the old and new names from the same CA
// (join files written before stay good), and a running listener serves it
// without a restart.
func TestServerCertFollowsTheAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	caPEM, err := hosts.EnsurePKI(dir, "127.0.0.1:7422")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, dir)
	if err := handshake(addr, caPEM, "fleet.example"); err == nil {
		t.Fatal("a name not yet covered was accepted")
	}
	again, err := hosts.EnsurePKI(dir, "fleet.example:7422", "[::1]:7422")
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(caPEM) {
		t.Fatal("the CA changed")
	}
	for _, name := range []string{"127.0.0.1", "fleet.example", "::1"} {
		if err := handshake(addr, caPEM, name); err != nil {
			t.Fatalf("%s after the certificate was issued again: %v", name, err)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "server.pem"))
	b, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sans := cert.DNSNames
	for _, ip := range cert.IPAddresses {
		sans = append(sans, ip.String())
	}
	slices.Sort(sans)
	if want := []string{"127.0.0.1", "::1", "fleet.example"}; !slices.Equal(sans, want) {
		t.Fatalf("SANs %v, want %v", sans, want)
	}
	// Covered already: nothing is issued.
	before, _ := os.Stat(filepath.Join(dir, "server.pem"))
	if _, err := hosts.EnsurePKI(dir, "127.0.0.1:9"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, "server.pem"))
	if !before.ModTime().Equal(after.ModTime()) {
		t.Fatal("a covered address issued a certificate again")
	}
}

// TestLostCAKeyIsAnError: a CA certificate whose key is gone is not
// replaced by a new CA (which would void every join file).
func TestLostCAKeyIsAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	if _, err := hosts.EnsurePKI(dir, "127.0.0.1:7422"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "ca-key.pem"))
	if _, err := hosts.EnsurePKI(dir, "other.example:7422"); err == nil {
		t.Fatal("EnsurePKI without the CA key succeeded")
	}
}
