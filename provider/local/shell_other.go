//go:build !windows

package local

import "fmt"

// systemShells are the shells that run here; the first is the default.
var systemShells = []string{"sh"}

// crlf says whether output lines end with CR LF: no, with LF.
const crlf = false

// shellCommand returns how shell (checked by CheckShell) runs command.
func shellCommand(shell, command string) (*shellCmd, error) {
	if shell != "" && shell != "sh" {
		return nil, fmt.Errorf("the %s shell does not run here", shell)
	}
	return shCommand(command)
}
