//go:build unix

package proctree

import (
	"os/exec"
	"syscall"
)

func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// group is the process group its first process leads; its id is that
// process's pid.
type group struct{ pgid int }

func (g *group) start(cmd *exec.Cmd) error {
	setGroup(cmd)
	if err := startOOMFirst(cmd); err != nil {
		return err
	}
	g.pgid = cmd.Process.Pid
	return nil
}

// kill sends SIGKILL to the group. ESRCH (all gone) is not worth reporting.
func (g *group) kill() { killGroup(g.pgid) }
