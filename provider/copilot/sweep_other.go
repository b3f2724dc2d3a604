//go:build !linux

package copilot

import (
	"os/exec"

	"github.com/agents-fleet/fleet/internal/proctree"
)

// outsiders is Linux-only (it reads /proc); elsewhere an interrupted turn
// relies on the CLI's own cancel, and Close on proctree.
func outsiders(*proctree.Tree, *exec.Cmd) map[int]bool { return nil }

func sweepTurn(*proctree.Tree, *exec.Cmd, map[int]bool) int { return 0 }
