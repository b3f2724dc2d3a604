//go:build windows

package proctree

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// jobProcessList is JOBOBJECT_BASIC_PROCESS_ID_LIST with room for 64 pids.
type jobProcessList struct {
	assigned, listed uint32
	pids             [64]uintptr
}

// pids lists the processes in g's job.
func (g *group) pids(t *testing.T) []uint32 {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	var l jobProcessList
	if err := windows.QueryInformationJobObject(g.job, windows.JobObjectBasicProcessIdList, uintptr(unsafe.Pointer(&l)), uint32(unsafe.Sizeof(l)), nil); err != nil {
		t.Fatalf("list the job's processes: %v", err)
	}
	out := make([]uint32, l.listed)
	for i := range out {
		out[i] = uint32(l.pids[i])
	}
	return out
}

// exeNames maps the pids of the running processes to their executables'
// names, lower case.
func exeNames(t *testing.T) map[uint32]string {
	t.Helper()
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		t.Fatalf("list processes: %v", err)
	}
	defer windows.CloseHandle(snap)
	names := map[uint32]string{}
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		names[pe.ProcessID] = strings.ToLower(windows.UTF16ToString(pe.ExeFile[:]))
	}
	return names
}

// proc is a handle to a process, which the test closes, and its pid.
type proc struct {
	h   windows.Handle
	pid uint32
}

// waitForPing waits until g's job holds a ping.exe and returns every
// process of the job then.
func waitForPing(t *testing.T, g *Group) []proc {
	t.Helper()
	var pids []uint32
	testwait.For(t, testwait.Bound, "ping.exe in the job", func() bool {
		pids = g.pids(t)
		names := exeNames(t)
		for _, pid := range pids {
			if names[pid] == "ping.exe" {
				return true
			}
		}
		return false
	})
	var ps []proc
	for _, pid := range pids {
		h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, pid)
		if err != nil {
			continue // exited meanwhile: a cmd.exe that was done
		}
		ps = append(ps, proc{h, pid})
		t.Cleanup(func() { windows.CloseHandle(h) })
	}
	return ps
}

// waitGone fails t unless every process of ps has exited within the bound
// (ping -n 30 would run for 29 s).
func waitGone(t *testing.T, ps []proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ps {
		left := max(time.Until(deadline), 0)
		if ev, err := windows.WaitForSingleObject(p.h, uint32(left/time.Millisecond)); ev != windows.WAIT_OBJECT_0 {
			t.Fatalf("process %d still runs 20 s after Kill (wait: %#x %v)", p.pid, ev, err)
		}
	}
}

// Kill ends the whole tree: the cmd.exe started, the cmd.exe it started
// and the ping that one started.
func TestGroupKillEndsGrandchildren(t *testing.T) {
	cmd := exec.Command("cmd.exe", "/c", "cmd /c ping -n 30 127.0.0.1")
	g, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	ps := waitForPing(t, g)
	if len(ps) < 3 {
		t.Fatalf("the job holds %d live processes, want the two cmd.exe and the ping at least", len(ps))
	}
	g.Kill()
	g.Kill() // harmless
	waitGone(t, ps)
	if err := cmd.Wait(); err == nil {
		t.Fatal("cmd.exe exited 0 after Kill")
	}
}

// What the first process left running when it exited goes with Kill, as
// the local provider does after every command.
func TestGroupKillAfterTheFirstProcessExited(t *testing.T) {
	cmd := exec.Command("cmd.exe", "/c", "start /b ping -n 30 127.0.0.1 >NUL")
	g, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	ps := waitForPing(t, g)
	g.Kill()
	waitGone(t, ps)
}

// A process that cannot start leaves no job behind and says why.
func TestStartGroupError(t *testing.T) {
	if _, err := StartGroup(exec.Command(`C:\no\such\program.exe`)); err == nil {
		t.Fatal("started a program that does not exist")
	}
}

// A Tree started with Start ends with Kill as its Group does: the agent
// CLI and what its tools started (agentcli starts every CLI this way).
func TestTreeStartKillEndsGrandchildren(t *testing.T) {
	tree := New()
	cmd := exec.Command("cmd.exe", "/c", "cmd /c ping -n 30 127.0.0.1")
	cmd.Env = tree.Env(os.Environ())
	if err := tree.Start(cmd); err != nil {
		t.Fatal(err)
	}
	tree.mu.Lock()
	g := tree.g
	tree.mu.Unlock()
	ps := waitForPing(t, g)
	tree.Kill(cmd)
	waitGone(t, ps)
	cmd.Wait()
}
