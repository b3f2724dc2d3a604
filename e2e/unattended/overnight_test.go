//go:build linux

// The soak of issue 26 (bench/overnight.sh runs it for hours; go test runs
// a short variant, FLEET_OVERNIGHT, default 30s of new work): a fleet of
// Claude Code workers with trouble injected — 429s with a reset, hanging
// responses, 5xx outages, a worker that allocates memory until it is
// stopped, the endpoint gone for a while — and the check that nothing is
// lost.

package unattended

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// The kinds of task the soak cycles through, each a rule of the script.
var kinds = strings.Fields(cmp.Or(os.Getenv("FLEET_OVERNIGHT_KINDS"), "ok limited hang flaky hog ok"))

func script() modelmock.Script {
	u := modelmock.Usage{Input: 50, Output: 5}
	return modelmock.Script{Rules: []modelmock.Rule{
		// What a healed or resumed session is told.
		{Name: "continue", Match: "continue", Turns: []modelmock.Turn{{Text: "carried on", Usage: u}}},
		{Name: "resumed", Match: "previous attempt stalled", Turns: []modelmock.Turn{{Text: "carried on after a resume", Usage: u}}},
		{Name: "ok", Match: "ok:", Turns: []modelmock.Turn{{Text: "done", Usage: u}}},
		// A 429 burst with a reset (retry-after): Claude waits it out.
		{Name: "limited", Match: "limited:", Turns: []modelmock.Turn{
			{Status: 429, ErrorMessage: "rate limited", Times: 1, Headers: map[string]string{"retry-after": "3"}},
			{Text: "through the limit", Usage: u},
		}},
		// A hanging response: the fleet's stall timeout heals it.
		{Name: "hang", Match: "hang:", Turns: []modelmock.Turn{{Hang: true}}},
		// 5xx after Claude's retries: resumed after a backoff.
		{Name: "flaky", Match: "flaky:", Turns: []modelmock.Turn{{Status: 503, ErrorMessage: "upstream is down"}}},
		// A tool that holds memory until the fleet stops the worker.
		{Name: "hog", Match: "hog:", Turns: []modelmock.Turn{
			{Usage: u, ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{
				"command": "x=$(head -c 900000000 /dev/zero | tr '\\0' a); sleep 600", "description": "hold memory"}}}},
			{Text: "never", Usage: u},
		}},
	}}
}

// outcome is how a task ended.
type outcome struct {
	kind   string
	done   bool
	reason string // for a failure
}

func TestOvernight(t *testing.T) {
	dur := 30 * time.Second
	if v := os.Getenv("FLEET_OVERNIGHT"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			t.Fatalf("FLEET_OVERNIGHT=%q: %v", v, err)
		}
	}
	bin := modelmock.RequireCLI(t, "claude")
	mock, err := modelmock.Start(script())
	if err != nil {
		t.Fatal(err)
	}
	mu := sync.Mutex{}
	defer func() { mu.Lock(); mock.Close(); mu.Unlock() }()
	addr := strings.TrimPrefix(mock.URL(), "http://")

	e := e2etest.NewEnv(t)
	e.Config(map[string]any{"agentStallTimeoutMs": 4000, "workerMemoryMiB": 700},
		map[string]any{"providers": map[string]any{"claude": map[string]any{"path": bin, "env": map[string]string{
			"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-test"}}}})
	d := start(e, "--control-socket", "--provider", "claude", "--workers", "4", "--name", "overnight")
	cmd := d.Cmd
	c := d.Dial(protocol.ClientOther, "soak")
	session := c.Welcome().SessionID

	// The operator: approves every confirm, answers every permission prompt
	// with its first choice (allow once), and keeps what the fleet says.
	var (
		smu       sync.Mutex
		taskKind  = map[string]string{}  // task → kind, from its spawn
		workerOf  = map[string]string{}  // worker → task
		outcomes  = map[string]outcome{} // task → how it ended
		healed    int
		waited    int
		readerEnd = make(chan struct{})
	)
	go func() {
		defer close(readerEnd)
		for {
			m, _, _, err := c.Next()
			if err != nil {
				return
			}
			switch m := m.(type) {
			case *protocol.Transcript:
				if os.Getenv("FLEET_OVERNIGHT_DEBUG") != "" {
					t.Logf("%s %s: %s", m.Agent, m.Role, short(m.Text))
				}
			case *protocol.ConfirmRequest:
				c.Send(&protocol.ConfirmResponse{ID: m.ID, Approve: true})
			case *protocol.AskRequest:
				if os.Getenv("FLEET_OVERNIGHT_DEBUG") != "" {
					t.Logf("ask %s: %s %+v", m.ID, short(m.Question), m.Choices)
				}
				if len(m.Choices) > 0 {
					c.Send(&protocol.AskResponse{ID: m.ID, Text: m.Choices[0].Value})
				}
			case *protocol.HubEvent:
				if os.Getenv("FLEET_OVERNIGHT_DEBUG") != "" {
					t.Logf("hub %s %s: %s", m.From, m.Kind, short(m.Text))
				}
				smu.Lock()
				switch m.Kind {
				case protocol.HubTaskCreated:
					// "t3: kind: …"
					id, rest, _ := strings.Cut(m.Text, ": ")
					kind, _, _ := strings.Cut(rest, ":")
					taskKind[id] = kind
				case protocol.HubSpawned:
					id, _, _ := strings.Cut(m.Text, ":")
					workerOf[m.From] = strings.Fields(id)[0]
				case protocol.HubCompleted:
					if id := workerOf[m.From]; id != "" {
						outcomes[id] = outcome{kind: taskKind[id], done: true}
					}
				case protocol.HubFailed:
					if id := workerOf[m.From]; id != "" {
						_, why, _ := strings.Cut(m.Text, ": ")
						outcomes[id] = outcome{kind: taskKind[id], reason: why}
					}
				case protocol.HubStalled:
					healed++
				case protocol.HubRateLimited:
					waited++
				}
				smu.Unlock()
			}
		}
	}()

	// The daemon's CPU and memory over time.
	type sample struct {
		at       time.Duration
		cpu      float64 // share of a core since the last sample
		rssMiB   float64
		children int
	}
	var samples []sample
	start := time.Now()
	lastTicks, lastAt := cpuTicks(cmd.Process.Pid), start
	record := func() {
		now := time.Now()
		ticks := cpuTicks(cmd.Process.Pid)
		samples = append(samples, sample{at: now.Sub(start).Round(time.Second),
			cpu:    float64(ticks-lastTicks) / 100 / now.Sub(lastAt).Seconds(),
			rssMiB: float64(vmRSS(cmd.Process.Pid)) / 1024, children: len(markedPids(t, provider.SessionEnv+"="+session))})
		lastTicks, lastAt = ticks, now
	}

	// New work for dur, one task every 1.5 s, the endpoint gone for a
	// sixth of it (at most a minute) from the middle.
	outageAt, outageFor := dur/2, min(dur/6, time.Minute)
	outage := false
	spawned := 0
	sampleEvery := max(dur/20, 5*time.Second)
	nextSample := start.Add(sampleEvery)
	for time.Since(start) < dur {
		kind := kinds[spawned%len(kinds)]
		spawned++
		if err := c.Send(&protocol.Prompt{Text: fmt.Sprintf("/spawn %s: task %d", kind, spawned)}); err != nil {
			t.Fatalf("send: %v", err)
		}
		el := time.Since(start)
		switch {
		case !outage && el >= outageAt && el < outageAt+outageFor:
			mu.Lock()
			mock.Close()
			mu.Unlock()
			outage = true
			t.Logf("%s: the endpoint goes away for %s", el.Round(time.Second), outageFor)
		case outage && el >= outageAt+outageFor:
			mu.Lock()
			mock, err = modelmock.StartAddr(addr, script())
			mu.Unlock()
			if err != nil {
				t.Fatalf("the endpoint back at %s: %v", addr, err)
			}
			outage = false
			t.Logf("%s: the endpoint is back", el.Round(time.Second))
		}
		if time.Now().After(nextSample) {
			record()
			nextSample = nextSample.Add(sampleEvery)
		}
		time.Sleep(1500 * time.Millisecond) // the soak's pace, not a wait for a condition
	}
	if outage {
		mu.Lock()
		mock, err = modelmock.StartAddr(addr, script())
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Every task ends, done or failed with a reason.
	settleBy := time.Now().Add(5 * time.Minute)
	for {
		smu.Lock()
		n, created := len(outcomes), len(taskKind)
		smu.Unlock()
		if created >= spawned && n >= created {
			break
		}
		if time.Now().After(settleBy) {
			smu.Lock()
			var open []string
			for id := range taskKind {
				if _, ok := outcomes[id]; !ok {
					open = append(open, id+" ("+taskKind[id]+")")
				}
			}
			smu.Unlock()
			sort.Strings(open)
			t.Fatalf("%d tasks spawned, %d created, %d ended; still open after 5 minutes: %v", spawned, created, n, open)
		}
		if time.Now().After(nextSample) {
			record()
			nextSample = nextSample.Add(sampleEvery)
		}
		time.Sleep(500 * time.Millisecond) // polling the tallies, a condition
	}
	record()

	// No agent process outlives its worker.
	deadline := time.Now().Add(time.Minute)
	for len(markedPids(t, provider.SessionEnv+"="+session)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the session still running after every task ended: %v", markedPids(t, provider.SessionEnv+"="+session))
		}
		time.Sleep(200 * time.Millisecond) // polling /proc, a condition
	}
	// The daemon never restarted: the same process, still serving.
	select {
	case <-d.Done:
		t.Fatal("the fleet exited during the soak")
	default:
	}

	// The report.
	smu.Lock()
	defer smu.Unlock()
	byKind := map[string][2]int{}
	reasons := map[string]int{}
	for _, o := range outcomes {
		k := byKind[o.kind]
		if o.done {
			k[0]++
		} else {
			k[1]++
			if strings.TrimSpace(o.reason) == "" {
				t.Errorf("a %s task failed without a reason", o.kind)
			}
			reasons[digits.ReplaceAllString(short(o.reason), "N")]++
		}
		byKind[o.kind] = k
	}
	var rep strings.Builder
	fmt.Fprintf(&rep, "soak: %s of new work, %d tasks, the endpoint away %s from %s\n", dur, spawned, outageFor, outageAt)
	names := make([]string, 0, len(byKind))
	for k := range byKind {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&rep, "  %-8s done %3d  failed %3d\n", k, byKind[k][0], byKind[k][1])
	}
	fmt.Fprintf(&rep, "  healed (stalls and outages resumed): %d; rate limits waited out: %d\n", healed, waited)
	for r, n := range reasons {
		fmt.Fprintf(&rep, "  failed %d× %s\n", n, r)
	}
	fmt.Fprintf(&rep, "  daemon over time (elapsed, CPU of a core, RSS MiB, agent processes):\n")
	for _, s := range samples {
		fmt.Fprintf(&rep, "    %8s %5.1f%% %7.1f %3d\n", s.at, 100*s.cpu, s.rssMiB, s.children)
	}
	t.Log("\n" + rep.String())
	if p := os.Getenv("FLEET_OVERNIGHT_REPORT"); p != "" {
		os.WriteFile(p, []byte(rep.String()), 0o644)
	}
	if healed == 0 || waited == 0 {
		t.Errorf("the trouble was not met: %d healed, %d rate limits waited out", healed, waited)
	}
	if k := byKind["ok"]; k[0] == 0 {
		t.Error("no plain task completed")
	}
	if k := byKind["hog"]; k[1] == 0 {
		t.Error("no memory hog was stopped")
	}
}

// digits are replaced in failure reasons so that alike ones count together.
var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

func short(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// vmRSS is the process's resident memory in KiB.
func vmRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}
