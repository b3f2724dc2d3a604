//go:build windows

package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// statusAddr is the status pipe of the hub dir: one name per fleet home
// (pipes have no folder), from a hash of the dir's absolute path, which
// Windows compares without case.
func statusAddr(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte(strings.ToLower(filepath.Clean(dir))))
	return `\\.\pipe\agents-fleet-hub-` + hex.EncodeToString(sum[:8])
}
