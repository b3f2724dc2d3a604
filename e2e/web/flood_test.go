//go:build linux

package web

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserFlood: issue 25's figures, measured in the browser against
// the built binaries. First paint of a fleet with 1,000 history lines;
// then a worker prints 10,000 lines a second for 10 s (each a transcript
// frame) while the page shows that worker's transcript: no main-thread
// task of the page may take 200 ms or more (the Long Tasks API), fleet web
// must stay under 15% of a core, and the page keeps its bounded window of
// the newest lines. The figures go to the log (docs/performance.md).
func TestBrowserFlood(t *testing.T) {
	e := setup(t, fleetOpts{})
	ctx := e.ctx

	// A fleet with 1,000 history lines, then the page's first paint.
	e.open(t)
	e.prompt(t, "$ seq 1000")
	waitText(ctx, t, "#task-counts", "1 done")
	e.open(t) // a fresh page on the fleet as it is now
	testwait(t, "the page ready", func() bool { return eval[float64](t, ctx, `window.fleetStats.readyAt`) > 0 })
	ready := eval[float64](t, ctx, `window.fleetStats.readyAt`)
	fcp := eval[float64](t, ctx, `(performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || 0`)
	nav := eval[float64](t, ctx, `(performance.getEntriesByType("navigation")[0] || {}).responseEnd || 0`)
	t.Logf("first paint, 1,000 history lines: first contentful paint %.0f ms, replay drawn %.0f ms after navigation start (the document's response ended at %.0f ms)", fcp, ready, nav)
	e.selectWorker(t, "w1")
	waitText(ctx, t, "#transcript", "1000")

	eval[bool](t, ctx, `(() => {
		window.__long = [];
		new PerformanceObserver((l) => { for (const x of l.getEntries()) window.__long.push(x.duration); }).observe({ type: "longtask" });
		return true })()`)
	frames0 := eval[float64](t, ctx, `window.fleetStats.frames`)
	web0, fleet0 := cpuTicks(t, e.web.cmd.Process.Pid), cpuTicks(t, e.run.cmd.Process.Pid)
	ours := []int{os.Getpid(), e.web.cmd.Process.Pid, e.run.cmd.Process.Pid, chromedp.FromContext(ctx).Browser.Process().Pid}
	busy0, ours0 := busyTicks(t), treeTicks(ours)
	start := time.Now()
	e.prompt(t, "$ for i in $(seq 100); do seq 1060; sleep 0.1; done; echo flood-over")
	testwait(t, "the flood's worker", func() bool {
		return eval[int](t, ctx, `document.querySelectorAll('#workers tr[data-id="w2"]').length`) == 1
	})
	e.selectWorker(t, "w2")
	deadline := time.Now().Add(3 * bound)
	for !strings.Contains(eval[string](t, ctx, `document.getElementById("transcript").lastElementChild ? document.getElementById("transcript").lastElementChild.textContent : ""`), "flood-over") {
		if time.Now().After(deadline) {
			t.Fatalf("the flood's last line never reached the page")
		}
		time.Sleep(100 * time.Millisecond) // polling the page, a condition
	}
	wall := time.Since(start)
	web1, fleet1 := cpuTicks(t, e.web.cmd.Process.Pid), cpuTicks(t, e.run.cmd.Process.Pid)
	busy1, ours1 := busyTicks(t), treeTicks(ours)
	frames := eval[float64](t, ctx, `window.fleetStats.frames`) - frames0
	long := eval[[]float64](t, ctx, `window.__long`)
	lines := eval[int](t, ctx, `document.querySelectorAll("#transcript > *").length`)
	missed := eval[string](t, ctx, `document.getElementById("transcript-missed").textContent`)
	renders := eval[map[string]float64](t, ctx, `window.fleetStats`)

	tick := float64(clockTick)
	webCPU := float64(web1-web0) / tick / wall.Seconds()
	fleetCPU := float64(fleet1-fleet0) / tick / wall.Seconds()
	worst := 0.0
	for _, d := range long {
		worst = max(worst, d)
	}
	// A long task is measured in wall time: on a machine busy with other
	// work (go test ./... runs packages side by side) the page's thread
	// waits for a CPU, and a short task looks long. The bound is checked
	// when the rest of the machine left the test its cores, and always in
	// .ci/run's step that runs this test alone (FLEET_WEB_FLOOD_STRICT=1).
	others := float64((busy1-busy0)-(ours1-ours0)) / tick / wall.Seconds()
	t.Logf("the page's drawing: %.0f draws, %.1f ms each on average, the longest %.1f ms", renders["renders"], renders["renderMs"]/max(renders["renders"], 1), renders["renderMaxMs"])
	t.Logf("flood: %.0f frames in %.1f s (%.0f frames/s at the page); fleet web %.1f%% of a core, the fleet %.1f%% (ratio %.2f); %d long tasks, the longest %.0f ms; the transcript draws %d lines (%s); other work on the machine: %.2f cores",
		frames, wall.Seconds(), frames/wall.Seconds(), 100*webCPU, 100*fleetCPU, webCPU/max(fleetCPU, 1e-9), len(long), worst, lines, missed, others)
	if frames < 106000 {
		t.Errorf("the page got %.0f frames; want the 106,000 lines and more", frames)
	}
	strict := os.Getenv("FLEET_WEB_FLOOD_STRICT") == "1"
	switch {
	case worst < 200:
	case strict || others < 0.5:
		t.Errorf("a main-thread task took %.0f ms; want none of 200 ms or more (all: %v; other work used %.2f cores meanwhile)", worst, long, others)
	default:
		t.Logf("other work used %.2f cores beside the test, so the 200 ms bound on long tasks (the longest %.0f ms) is not checked in this run; .ci/run checks it with the test alone", others, worst)
	}
	if webCPU >= 0.15 {
		t.Errorf("fleet web used %.1f%% of a core during the flood; want under 15%%", 100*webCPU)
	}
	if lines > 2000 || !strings.Contains(missed, "older lines not shown") {
		t.Errorf("the transcript holds %d lines, %q; want at most 2,000 and the count of those dropped", lines, missed)
	}
}

// busyTicks is the CPU time the whole machine has spent busy (all but
// idle and iowait), in clock ticks, from /proc/stat.
func busyTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return busy
}

// treeTicks is the CPU time of roots and all their descendants alive now,
// in clock ticks (a descendant that ended counts in its parent's
// children's times, cutime and cstime, once waited for).
func treeTicks(roots []int) int64 {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	ticks := map[int]int64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		var sum int64
		for _, v := range f[11:15] { // utime stime cutime cstime
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
		ticks[pid] = sum
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	var total int64
	for pid := range ticks {
		for p, hops := pid, 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if in[p] {
				total += ticks[pid]
				break
			}
		}
	}
	return total
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTick = 100

// cpuTicks is the CPU time pid has used (user and system), in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3;
	// utime and stime are 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}
