//go:build tools

// Package deps pins modules that packages are about to use.
package deps

import (
	_ "github.com/creack/pty"
	_ "modernc.org/sqlite"
)
