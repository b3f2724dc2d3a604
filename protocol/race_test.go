//go:build race

package protocol

// raceEnabled: under the race detector sync.Pool drops items at random, so
// tests of what a pool saves do not hold.
const raceEnabled = true
