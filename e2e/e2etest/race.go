//go:build race

package e2etest

// Race: the test binary runs under the race detector, so its own client
// goroutines read many times slower than a real console.
const Race = true
