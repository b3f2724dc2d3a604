//go:build !linux

package local

// KillLeftovers is only implemented on Linux (it reads /proc); elsewhere a
// killed fleet's tasks keep running until they end.
func KillLeftovers(session string) ([]int, error) { return nil, nil }
