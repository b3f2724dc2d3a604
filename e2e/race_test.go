//go:build race

package e2e

// raceEnabled: the test binary runs under the race detector, so its own
// client goroutines read many times slower than a real console.
const raceEnabled = true
