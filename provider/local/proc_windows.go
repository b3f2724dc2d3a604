//go:build windows

package local

import "os/exec"

// setProcessGroup: Windows job objects are not wired up yet; only the shell
// itself is stopped on cancel.
func setProcessGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
