//go:build !unix

package store

// spaceHint describes a write that failed for want of space; "" otherwise.
// (Without flock, lockfile.TryLock fails here, so Append saves transcript
// lines straight to SQLite on these platforms.)
func spaceHint(err error) string { return "" }
