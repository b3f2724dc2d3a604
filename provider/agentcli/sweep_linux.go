//go:build linux

package agentcli

import (
	"syscall"
	"time"
)

// sweepBound is how long SweepOutsiders keeps sweeping for processes that
// were being forked while it ran.
const sweepBound = 3 * time.Second

// Outsiders lists the tree's processes outside the CLI's own process
// group: the commands its tools run in groups or sessions of their own
// (Copilot's shell does) and whatever they left behind.
func (p *Proc) Outsiders() map[int]bool {
	leader := p.leader()
	out := map[int]bool{}
	for _, pid := range p.tree.Alive() {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != leader {
			out[pid] = true
		}
	}
	return out
}

// SweepOutsiders ends what a turn started outside the CLI's process group
// and left running: the tree's processes that were not among before (the
// Outsiders when the turn began), with their process groups. The CLI and
// what runs in its own group, and what earlier turns left (a background
// shell the model started on purpose), are spared: the session goes on;
// Kill ends everything. It returns how many processes it ended.
func (p *Proc) SweepOutsiders(before map[int]bool) int {
	killed := map[int]bool{}
	leader := p.leader()
	self := syscall.Getpgrp()
	deadline := time.Now().Add(sweepBound)
	for {
		var hit bool
		for pid := range p.Outsiders() {
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
