//go:build linux

package memstat

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// TestMain makes the test binary a memory holder when asked: it touches
// MEMSTAT_HOLD_MIB mebibytes, starts a child holding MEMSTAT_CHILD_MIB
// more when set, says "ready" and waits to be killed.
func TestMain(m *testing.M) {
	if n, _ := strconv.Atoi(os.Getenv("MEMSTAT_HOLD_MIB")); n > 0 {
		buf := make([]byte, n*MiB)
		for i := range buf {
			buf[i] = byte(i)
		}
		if c, _ := strconv.Atoi(os.Getenv("MEMSTAT_CHILD_MIB")); c > 0 {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), fmt.Sprintf("MEMSTAT_HOLD_MIB=%d", c), "MEMSTAT_CHILD_MIB=0")
			// It goes when this holder is killed.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			cmd.Stdout = os.Stdout
			if err := cmd.Start(); err != nil {
				panic(err)
			}
		} else {
			fmt.Println("ready")
		}
		time.Sleep(time.Hour)
		fmt.Println(buf[len(buf)-1])
		return
	}
	os.Exit(m.Run())
}

func TestAvailableReadsTheMachine(t *testing.T) {
	n, ok := Available()
	if !ok || n == 0 {
		t.Fatalf("Available() = %d, %v on Linux", n, ok)
	}
}

// TestAvailableHonoursTheCgroupLimit: in a cgroup v2 with a limit the room
// left under it counts when it is less than MemAvailable.
func TestAvailableHonoursTheCgroupLimit(t *testing.T) {
	proc, cg := t.TempDir(), t.TempDir()
	oldProc, oldCg := procRoot, cgroupRoot
	procRoot, cgroupRoot = proc, cg
	t.Cleanup(func() { procRoot, cgroupRoot = oldProc, oldCg })
	write := func(path, data string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proc, "meminfo"), "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8388608 kB\n")
	write(filepath.Join(proc, "self", "cgroup"), "0::/fleet.slice/run.scope\n")
	write(filepath.Join(cg, "fleet.slice", "run.scope", "memory.max"), "max\n")
	write(filepath.Join(cg, "fleet.slice", "run.scope", "memory.current"), "1000\n")
	write(filepath.Join(cg, "fleet.slice", "memory.max"), fmt.Sprint(1024*MiB)+"\n")
	write(filepath.Join(cg, "fleet.slice", "memory.current"), fmt.Sprint(200*MiB)+"\n")
	if n, ok := Available(); !ok || n != 824*MiB {
		t.Fatalf("Available() = %d MiB, %v; want 824 MiB (the parent cgroup's limit less its use)", n/MiB, ok)
	}
	write(filepath.Join(cg, "fleet.slice", "memory.max"), "max\n")
	if n, ok := Available(); !ok || n != 8*1024*MiB {
		t.Fatalf("Available() = %d MiB, %v; want MemAvailable, 8192 MiB, without a limit", n/MiB, ok)
	}
	write(filepath.Join(proc, "meminfo"), "MemTotal: 1 kB\n")
	if _, ok := Available(); ok {
		t.Fatal("Available() is ok without MemAvailable")
	}
}

// TestSamplerSumsAMarkedTree: a process holding 64 MiB whose child holds
// 32 MiB more, marked w1 in session s1, counts about 96 MiB for w1; the
// same mark in another session and an unmarked process count for nothing.
func TestSamplerSumsAMarkedTree(t *testing.T) {
	hold := func(env ...string) int {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
			t.Fatalf("the holder said %q, %v", buf, err)
		}
		return cmd.Process.Pid
	}
	// A session of this run's own: nothing else on the machine has it.
	s1 := fmt.Sprintf("s1-%d-%d", os.Getpid(), time.Now().UnixNano())
	w1 := hold("MEMSTAT_HOLD_MIB=64", "MEMSTAT_CHILD_MIB=32", "TEST_SESSION="+s1, "TEST_WORKER=w1")
	hold("MEMSTAT_HOLD_MIB=16", "TEST_SESSION=s2-"+s1, "TEST_WORKER=w1")
	hold("MEMSTAT_HOLD_MIB=16")
	s := &Sampler{Name: "TEST_WORKER", Scope: "TEST_SESSION", ScopeValue: s1}
	var got map[string]uint64
	testwait.For(t, testwait.Bound, "w1's tree measured", func() bool {
		got = s.Sample()
		return got["w1"] >= 96*MiB
	})
	// What w1's holder and its child hold, read here by pid: the sample
	// is that (the processes sleep, so it holds still), not more — the
	// same mark in another session and unmarked processes count for
	// nothing. (Binaries built with -race hold several times more.)
	want := treeRSS(t, w1)
	if len(got) != 1 || got["w1"] < want*95/100 || got["w1"] > want*105/100 {
		t.Fatalf("sampled %v; want w1 alone, %d MiB", got, want/MiB)
	}
	// A second sample reads no environment again and agrees.
	if again := s.Sample(); again["w1"] < 96*MiB {
		t.Fatalf("second sample %v", again)
	}
}

// treeRSS is the resident memory of pid and its children, from their stat.
func treeRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var total uint64
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		ppid, _ := strconv.Atoi(f[1])
		if p != pid && ppid != pid {
			continue
		}
		rss, _ := strconv.ParseUint(f[21], 10, 64)
		total += rss * pageSize
	}
	return total
}
