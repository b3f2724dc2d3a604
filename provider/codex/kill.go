package codex

import (
	"os/exec"

	"github.com/agents-fleet/fleet/internal/proctree"
)

// killCommands ends the commands Codex ran for the model in this session
// (every process whose environment carries commandEnv=mark, however it
// detached) and their process groups, sparing the app-server's own group:
// after turn/interrupt Codex keeps a running command alive, and the
// session must go on. Off Linux it does nothing: those commands end with
// the session's process tree at Close.
func killCommands(mark string, cmd *exec.Cmd) {
	spare := -1
	if cmd != nil && cmd.Process != nil {
		spare = cmd.Process.Pid // the tree's group leader (proctree.Prepare)
	}
	proctree.SweepMarked(commandEnv, mark, spare)
}

// markedCommands lists this user's live processes with commandEnv=mark.
func markedCommands(mark string) []int { return proctree.FindMarked(commandEnv, mark) }
