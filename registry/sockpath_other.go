//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package registry

// MaxSocketPath is the longest Unix socket path in bytes. Windows' AF_UNIX and
// the remaining Unix systems have a 108-byte sun_path, one byte of which is the NUL.
const MaxSocketPath = 107
