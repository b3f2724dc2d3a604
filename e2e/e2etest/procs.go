package e2etest

import (
	"os"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/provider"
)

// MarkedProcesses lists the live processes (zombies excluded) whose
// environment marks them with session (Linux: /proc; elsewhere nil): what
// a fleet of that session started, wherever it runs on this machine.
func MarkedProcesses(session string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains("\x00"+string(env), "\x00"+provider.SessionEnv+"="+session+"\x00") {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(stat), ") Z ") {
			pids = append(pids, pid)
		}
	}
	return pids
}
