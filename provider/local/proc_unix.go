//go:build !windows

package local

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the command in a process group of its own, so that
// cancelling a task stops everything it started, not just the shell.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the command's whole process group. ESRCH (already gone)
// is not an error worth reporting.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
