//go:build !windows

package cli

import "os"

// exit ends the process with code once Execute has returned.
func exit(code int) { os.Exit(code) }
