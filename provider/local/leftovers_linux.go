//go:build linux

package local

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"github.com/agents-fleet/fleet/provider"
)

// KillLeftovers stops the processes of session that a previous fleet
// process left running (a fleet killed with SIGKILL cannot stop its tasks'
// process groups): every process of this user, other than this one and
// its process group, whose environment has provider.SessionEnv=session
// gets its process group killed (SIGKILL). The caller must know that no
// live fleet process serves the session (the session lock). It returns the pids it found. Processes
// that cannot be read (another user's, or gone meanwhile) are skipped.
func KillLeftovers(session string) ([]int, error) {
	if session == "" {
		return nil, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	// NAME=value entries are NUL-terminated: the mark is an entry, with the
	// NUL that ends the one before it (none for the first entry).
	mark := []byte("\x00" + provider.SessionEnv + "=" + session + "\x00")
	self, selfGroup := os.Getpid(), syscall.Getpgrp()
	uid := os.Getuid()
	var found []int
	groups := map[int]bool{}
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
		if err != nil || !(bytes.HasPrefix(env, mark[1:]) || bytes.Contains(env, mark)) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil || pgid == selfGroup {
			continue
		}
		found = append(found, pid)
		groups[pgid] = true
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	// A process that left its group (setsid, a daemonising script) is
	// killed on its own.
	for _, pid := range found {
		if pgid, err := syscall.Getpgid(pid); err == nil && !groups[pgid] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return found, nil
}
