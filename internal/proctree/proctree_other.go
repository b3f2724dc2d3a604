//go:build !linux

package proctree

import "os/exec"

// KillMarked finds nothing outside Linux: there is no portable way to read
// another process's environment. Kill still ends the process group.
func KillMarked(name, value string) []int { return nil }

// KillMarkedExcept finds nothing outside Linux either (see KillMarked).
func KillMarkedExcept(name, value, except string) []int { return nil }

func killMarked(name, value, except string, spare int) []int { return nil }

func findMarked(name, value, except string) []int { return nil }

// startOOMFirst is cmd.Start outside Linux (there is no oom_score_adj).
func startOOMFirst(cmd *exec.Cmd) error { return cmd.Start() }
