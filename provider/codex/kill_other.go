//go:build !linux

package codex

import "os/exec"

// killCommands is a no-op off Linux: the commands an interrupt left
// running end with the session's process tree at Close.
func killCommands(string, *exec.Cmd) {}
