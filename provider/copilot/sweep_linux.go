//go:build linux

package copilot

import (
	"os/exec"
	"syscall"
	"time"

	"github.com/agents-fleet/fleet/internal/proctree"
)

// sweepBound is how long sweepTurn keeps sweeping for processes that were
// being forked while it ran.
const sweepBound = 3 * time.Second

// outsiders lists the tree's processes outside the CLI's own process
// group: the commands its tools run (Copilot's shell starts each in a
// session of its own) and whatever they left behind.
func outsiders(tree *proctree.Tree, cmd *exec.Cmd) map[int]bool {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	leader := cmd.Process.Pid // the group's leader (proctree.Prepare)
	out := map[int]bool{}
	for _, pid := range tree.Alive() {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != leader {
			out[pid] = true
		}
	}
	return out
}

// sweepTurn ends what an interrupted turn started outside the CLI's
// process group and left running: processes of the tree that were not
// there when the turn began (before), with their process groups. The CLI
// and what it runs in its own group (and what earlier turns left, such as
// a background shell the model started on purpose) are spared: the
// session goes on. Close ends everything.
//
// It returns how many processes it ended.
func sweepTurn(tree *proctree.Tree, cmd *exec.Cmd, before map[int]bool) int {
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	killed := map[int]bool{}
	leader := cmd.Process.Pid
	self := syscall.Getpgrp()
	deadline := time.Now().Add(sweepBound)
	for {
		var hit bool
		for pid := range outsiders(tree, cmd) {
			if before[pid] {
				continue
			}
			hit = true
			killed[pid] = true
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid != leader && pgid != self {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !hit || time.Now().After(deadline) {
			return len(killed)
		}
		time.Sleep(20 * time.Millisecond) // let the killed exit before the next sweep
	}
}
