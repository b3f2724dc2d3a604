//go:build !linux

package agentcli

// Outsiders is Linux-only (it reads /proc); elsewhere an interrupted turn
// relies on the CLI's own cancel, and Kill on the process group.
func (p *Proc) Outsiders() map[int]bool { return nil }

// SweepOutsiders ends nothing off Linux.
func (p *Proc) SweepOutsiders(before map[int]bool) int { return 0 }
