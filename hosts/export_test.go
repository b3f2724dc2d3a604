package hosts

import "crypto/tls"

// ServerTLSForTest is the hub's TLS configuration for dir.
func ServerTLSForTest(dir string) *tls.Config { return serverTLS(dir) }
