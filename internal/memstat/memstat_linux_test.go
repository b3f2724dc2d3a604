//go:build linux

package memstat

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	hold := func(env ...string) {
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
	}
	hold("MEMSTAT_HOLD_MIB=64", "MEMSTAT_CHILD_MIB=32", "TEST_SESSION=s1", "TEST_WORKER=w1")
	hold("MEMSTAT_HOLD_MIB=16", "TEST_SESSION=s2", "TEST_WORKER=w1")
	hold("MEMSTAT_HOLD_MIB=16")
	s := &Sampler{Name: "TEST_WORKER", Scope: "TEST_SESSION", ScopeValue: "s1"}
	var got map[string]uint64
	testwait.For(t, testwait.Bound, "w1's tree measured", func() bool {
		got = s.Sample()
		return got["w1"] >= 96*MiB
	})
	if got["w1"] > 160*MiB || len(got) != 1 {
		t.Fatalf("sampled %v; want w1 alone, about 96 MiB", got)
	}
	// A second sample reads no environment again and agrees.
	if again := s.Sample(); again["w1"] < 96*MiB {
		t.Fatalf("second sample %v", again)
	}
}
