//go:build linux

package proctree

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// KillMarked kills every process of this user, other than this one and
// its process group, whose environment has name=value: its process group
// (SIGKILL), and the process itself when it left that group. It returns
// the pids it found. Processes that cannot be read (another user's, or
// gone meanwhile) are skipped; zombies are not counted.
func KillMarked(name, value string) []int { return killMarked(name, value, "", -1) }

// KillMarkedExcept is KillMarked sparing the marked processes whose
// environment also sets the variable except (to any value), and their
// process groups.
func KillMarkedExcept(name, value, except string) []int { return killMarked(name, value, except, -1) }

// killMarked is KillMarked sparing process group spare as a group (its
// marked members are still killed one by one); -1 spares none.
func killMarked(name, value, except string, spare int) []int {
	found := findMarked(name, value, except)
	if len(found) == 0 {
		return nil
	}
	selfGroup := syscall.Getpgrp()
	groups := map[int]bool{}
	for _, pid := range found {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid != selfGroup && pgid != spare {
			groups[pgid] = true
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for _, pid := range found {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return found
}

// findMarked lists the marked processes; with except != "", not those
// whose environment sets the variable except.
func findMarked(name, value, except string) []int {
	if value == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	// NAME=value entries are NUL-terminated: the mark is an entry, with the
	// NUL that ends the one before it (none for the first entry).
	mark := []byte("\x00" + name + "=" + value + "\x00")
	var skip []byte
	if except != "" {
		skip = []byte("\x00" + except + "=")
	}
	self := os.Getpid()
	uid := os.Getuid()
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != uid {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 || !(bytes.HasPrefix(env, mark[1:]) || bytes.Contains(env, mark)) {
			continue // a zombie has an empty environ
		}
		if skip != nil && (bytes.HasPrefix(env, skip[1:]) || bytes.Contains(env, skip)) {
			continue
		}
		found = append(found, pid)
	}
	return found
}

// OOMScoreBoost is how much higher than this process's own oom_score_adj
// a started group's first process gets: when memory runs out the kernel
// kills an agent (or a task's command) before the fleet that runs it.
const OOMScoreBoost = 500

// oomFirst raises pid's oom_score_adj to this process's plus
// OOMScoreBoost (at most 1000). Raising needs no privilege. What pid
// starts from then on inherits it; a child it forked before the write
// keeps this process's score, which is no worse than before.
func oomFirst(pid int) {
	own := 0
	if b, err := os.ReadFile("/proc/self/oom_score_adj"); err == nil {
		own, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
	}
	v := min(own+OOMScoreBoost, 1000)
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}
