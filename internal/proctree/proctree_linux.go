//go:build linux

package proctree

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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
// a started group's first process gets (at most 1000): when memory runs
// out, the kernel kills an agent (or a task's command) before the fleet
// that runs it.
const OOMScoreBoost = 500

// oomMu keeps startOOMFirst's raise, fork and restore together.
var oomMu sync.Mutex

// startOOMFirst starts cmd with oom_score_adj OOMScoreBoost above this
// process's. The child inherits the value at fork, so nothing it starts,
// however quickly, has less: this process raises its own value for the
// instant of the fork and lowers it back (an unprivileged process may go
// back down to where it was). When the value cannot be raised, cmd starts
// anyway.
func startOOMFirst(cmd *exec.Cmd) error {
	oomMu.Lock()
	defer oomMu.Unlock()
	const self = "/proc/self/oom_score_adj"
	b, err := os.ReadFile(self)
	if err != nil {
		return cmd.Start()
	}
	own := strings.TrimSpace(string(b))
	v, _ := strconv.Atoi(own)
	if os.WriteFile(self, []byte(strconv.Itoa(min(v+OOMScoreBoost, 1000))), 0) != nil {
		return cmd.Start()
	}
	err = cmd.Start()
	_ = os.WriteFile(self, []byte(own), 0)
	return err
}
