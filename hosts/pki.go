package hosts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The fleet's own certificate authority signs the hub's server
// certificate; a join file carries the CA certificate, and a host trusts
// nothing else (not the system's roots), so only this fleet's hub passes
// its TLS check. The CA key never leaves <fleetHome>/hosts.
const (
	caValidity   = 20 * 365 * 24 * time.Hour
	certValidity = 10 * 365 * 24 * time.Hour
)

// EnsurePKI makes the fleet's CA and the hub's server certificate in dir
// once, and makes the server certificate cover the host part of each of
// addrs (host:port or host): a certificate that does not is issued anew by
// the same CA with the names it had and the new ones, so join files
// written before stay good. It returns the CA certificate (PEM).
func EnsurePKI(dir string, addrs ...string) ([]byte, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	return ensurePKILocked(dir, addrs)
}

// ensurePKILocked is EnsurePKI; the hosts lock must be held.
func ensurePKILocked(dir string, addrs []string) ([]byte, error) {
	names := make([]string, 0, len(addrs))
	for _, a := range addrs {
		h := hostOf(a)
		if h == "" {
			return nil, fmt.Errorf("address %q names no host a certificate can cover", a)
		}
		names = append(names, h)
	}
	caPEM, ca, caKey, err := loadCA(dir)
	if errors.Is(err, fs.ErrNotExist) {
		caPEM, ca, caKey, err = newCA(dir)
	}
	if err != nil {
		return nil, err
	}
	cert, err := loadCert(filepath.Join(dir, certFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cert = nil
	case err != nil:
		return nil, err
	}
	if cert != nil && cert.CheckSignatureFrom(ca) != nil {
		cert = nil // from another CA (the CA was made anew): issue again
	}
	var missing []string
	for _, n := range names {
		if cert == nil || !covers(cert, n) {
			missing = append(missing, n)
		}
	}
	if cert != nil && len(missing) == 0 {
		return caPEM, nil
	}
	if cert != nil {
		missing = append(append(missing, cert.DNSNames...), ipStrings(cert.IPAddresses)...)
	}
	if err := issueServerCert(dir, ca, caKey, missing); err != nil {
		return nil, err
	}
	return caPEM, nil
}

// hostOf is the host part of "host:port", or addr itself when it has no
// port, without IPv6 brackets.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// covers reports whether cert is valid for host (a name or an IP address).
func covers(cert *x509.Certificate, host string) bool {
	return cert.VerifyHostname(host) == nil
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

func newCA(dir string) ([]byte, *x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("fleet CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "agents-fleet CA " + serial.Text(16)[:8]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("fleet CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	// The key first: a CA certificate without its key would be useless.
	if err := writeKey(filepath.Join(dir, caKeyFile), key); err != nil {
		return nil, nil, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFileAtomic(filepath.Join(dir, caCertFile), certPEM); err != nil {
		return nil, nil, nil, err
	}
	return certPEM, cert, key, nil
}

func issueServerCert(dir string, ca *x509.Certificate, caKey crypto.Signer, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("hub key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "agents-fleet hub"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	slices.Sort(hosts)
	for _, h := range slices.Compact(hosts) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("hub certificate: %w", err)
	}
	// The key first, then the certificate: the hub loads the pair when the
	// certificate changes (certLoader).
	if err := writeKey(filepath.Join(dir, keyFile), key); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func loadCA(dir string) ([]byte, *x509.Certificate, crypto.Signer, error) {
	certPath := filepath.Join(dir, caCertFile)
	certPEM, err := readFile(certPath)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := parseCert(certPEM, certPath)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPath := filepath.Join(dir, caKeyFile)
	keyPEM, err := readFile(keyPath)
	if err != nil {
		// Not ErrNotExist: a CA without its key is not made anew, which
		// would silently void every join file.
		return nil, nil, nil, fmt.Errorf("the fleet CA's key: %v", err)
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, nil, nil, fmt.Errorf("%s: no PEM key", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	return certPEM, cert, signer, nil
}

func loadCert(path string) (*x509.Certificate, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parseCert(data, path)
}

func parseCert(data []byte, what string) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", what)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

// CAPool is a pool holding only the CA certificate caPEM.
func CAPool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in PEM")
	}
	return pool, nil
}

// ClientTLS is the TLS a host dials the hub with: TLS 1.3, the server
// verified against the fleet's CA alone, for serverName (the host part of
// the hub's address).
func ClientTLS(caPEM []byte, serverName string) (*tls.Config, error) {
	pool, err := CAPool(caPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}, nil
}

// certLoader serves the hub's certificate from dir, loading the pair again
// when server.pem changes (`fleet hosts add` may issue one for a new
// address while the fleet runs).
type certLoader struct {
	dir string

	mu   sync.Mutex
	mod  time.Time
	size int64
	cert *tls.Certificate
}

// get is tls.Config.GetCertificate.
func (l *certLoader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	certPath := filepath.Join(l.dir, certFile)
	fi, err := os.Stat(certPath)
	if err != nil {
		return nil, fmt.Errorf("hub certificate: %w", err)
	}
	if l.cert != nil && fi.ModTime().Equal(l.mod) && fi.Size() == l.size {
		return l.cert, nil
	}
	c, err := tls.LoadX509KeyPair(certPath, filepath.Join(l.dir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("hub certificate: %w", err)
	}
	l.cert, l.mod, l.size = &c, fi.ModTime(), fi.Size()
	return l.cert, nil
}

// serverTLS is the hub's TLS: TLS 1.3 with the certificate from dir.
// Hosts authenticate inside the connection with their NKey, not with
// client certificates.
func serverTLS(dir string) *tls.Config {
	l := &certLoader{dir: dir}
	return &tls.Config{GetCertificate: l.get, MinVersion: tls.VersionTLS13}
}
