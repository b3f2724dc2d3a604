//go:build linux

package codex

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// killBound is how long killCommands keeps sweeping for commands that were
// being forked while it ran.
const killBound = 3 * time.Second

// killCommands ends the commands Codex ran for the model in this session
// (every process whose environment carries commandEnv=mark, however it
// detached) and their process groups, sparing the app-server's own group:
// after turn/interrupt Codex keeps a running command alive, and the
// session must go on. proctree.KillMarked would kill the marked processes'
// groups without exception, hence this variant.
func killCommands(mark string, cmd *exec.Cmd) {
	spare := -1
	if cmd != nil && cmd.Process != nil {
		spare = cmd.Process.Pid // the tree's group leader (proctree.Prepare)
	}
	self := syscall.Getpgrp()
	deadline := time.Now().Add(killBound)
	for {
		pids := markedCommands(mark)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid != spare && pgid != self {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // let the killed exit before the next sweep
	}
}

// markedCommands lists this user's live processes with commandEnv=mark.
func markedCommands(mark string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	entry := []byte(commandEnv + "=" + mark + "\x00")
	self, uid := os.Getpid(), os.Getuid()
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
		if err != nil || len(env) == 0 {
			continue // gone, or a zombie
		}
		if bytes.HasPrefix(env, entry) || bytes.Contains(env, append([]byte{0}, entry...)) {
			found = append(found, pid)
		}
	}
	return found
}
