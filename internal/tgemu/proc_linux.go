package tgemu

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel stop the emulator if the test process dies
// without running its cleanups (a test timeout's panic, kill -9).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
