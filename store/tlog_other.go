//go:build !unix

package store

import "os"

// lockFile: without flock there is no safe owner of a transcript log, so
// Append saves transcript lines straight to SQLite on these platforms.
func lockFile(path string) (f *os.File, ok bool, err error) { return nil, false, nil }

// spaceHint describes a write that failed for want of space; "" otherwise.
func spaceHint(err error) string { return "" }
