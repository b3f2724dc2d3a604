//go:build !race

package e2etest

// Race: the test binary runs under the race detector (see race.go).
const Race = false
