//go:build !linux

package proctree

// KillMarked finds nothing outside Linux: there is no portable way to read
// another process's environment. Kill still ends the process group.
func KillMarked(name, value string) []int { return nil }

func killMarked(name, value string, spare int) []int { return nil }

func findMarked(name, value string) []int { return nil }
