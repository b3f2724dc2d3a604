//go:build race

package store

// raceEnabled: the race detector slows SQLite (transpiled C) down by an
// order of magnitude, so the process tests write less under it.
const raceEnabled = true
