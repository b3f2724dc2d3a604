//go:build !windows

package hub

import "path/filepath"

// statusAddr is the status socket of the hub dir: dir/hub.sock.
func statusAddr(dir string) string { return filepath.Join(dir, "hub.sock") }
