package cli

import (
	"os"

	"golang.org/x/sys/windows"
)

// exit ends the process with code once Execute has returned (everything is
// written and closed by then). It ends it with TerminateProcess rather
// than ExitProcess (os.Exit): ExitProcess runs the DLLs' detach routines,
// which can wait on a console read that another thread is still blocked
// in, and `fleet console` then lingers after the operator quit (seen under
// Wine, after the TUI had restored the terminal and returned 0).
func exit(code int) {
	_ = windows.TerminateProcess(windows.CurrentProcess(), uint32(code))
	os.Exit(code) // not reached
}
