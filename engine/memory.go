package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// Memory (docs/unattended.md): a task starts on this machine only while
// the memory the fleet may use stays above Limits.MinFreeMemoryMiB, and a
// worker whose process tree holds more than Limits.WorkerMemoryMiB is
// stopped. memLoop measures both about once a second.

// Memory measures this machine for the engine (memstat on Linux).
type Memory interface {
	// Available is the memory the fleet may still use, in bytes; ok is
	// false when it cannot be known (then admission is by count alone).
	Available() (bytes uint64, ok bool)
	// Workers is the resident memory of each worker's whole process tree
	// on this machine, in bytes, by worker id; nil when it cannot be
	// measured.
	Workers() map[string]uint64
}

// Limits are the limits an operator may change for the session with
// /limits (config.json's limits hold their start values).
type Limits struct {
	// MinFreeMemoryMiB: a task starts on this machine only while this much
	// memory stays free; 0 admits by count alone. Default 1024.
	MinFreeMemoryMiB int
	// WorkerMemoryMiB stops a worker whose process tree holds more; 0 is
	// off (the default).
	WorkerMemoryMiB int
	// StallRetries is how many stalls of a turn are healed before the
	// worker fails (agent.go). Default 2.
	StallRetries int
	// RateLimitMaxWait bounds the wait for a rate or usage limit to reset
	// (ratelimit.go); past it the worker fails. Default 6 h.
	RateLimitMaxWait time.Duration
}

// DefaultStallRetries is Limits.StallRetries unless configured.
const DefaultStallRetries = 2

// DefaultMinFreeMemoryMiB is Limits.MinFreeMemoryMiB unless configured.
const DefaultMinFreeMemoryMiB = 1024

// memInterval is how often memLoop measures.
const memInterval = time.Second

// The memory a worker that started since the last measure is counted to
// take, until it shows in the measure: agent CLIs hold 300 MB to 1.2 GB
// each (docs/unattended.md), so a burst of starts cannot all pass the bar
// that one of them would have filled. A shell command is counted less.
const (
	newAgentReserve = 300 << 20
	newShellReserve = 32 << 20
)

// memState is what memLoop measured last, and what was started since.
type memState struct {
	avail    uint64 // bytes the fleet may use, at the last measure
	known    bool   // avail was measured
	reserved uint64 // counted for workers started since that measure
	rss      map[string]uint64
}

// memoryHoldsLocked says whether t must wait for memory to start on this
// machine, and sets its wait reason; false when the fleet has room, or
// no Memory, or the limit is 0.
func (e *Engine) memoryHoldsLocked(t *task) bool {
	min := uint64(e.limits.MinFreeMemoryMiB) << 20
	if e.cfg.Memory == nil || min == 0 || !e.mem.known {
		return false
	}
	free := uint64(0)
	if e.mem.avail > e.mem.reserved {
		free = e.mem.avail - e.mem.reserved
	}
	if free >= min {
		return false
	}
	e.setWaitLocked(t, fmt.Sprintf("%s: %d MiB free, keeping %d", memoryWait, free>>20, e.limits.MinFreeMemoryMiB))
	return true
}

// memoryWait starts the wait reason of a task held for memory.
const memoryWait = "waiting for memory"

// waitsForMemory reports whether t is pending, held for memory.
func waitsForMemory(t *task) bool {
	return t.status == taskPending && strings.HasPrefix(t.waitReason, memoryWait)
}

// retryMemoryWaitsLocked clears the memory waits and dispatches: each
// task held for memory is looked at again.
func (e *Engine) retryMemoryWaitsLocked() {
	for _, t := range e.tasks {
		if waitsForMemory(t) {
			e.setWaitLocked(t, "")
		}
	}
	e.dispatchLocked()
}

// startedLocalLocked counts the worker t just started on this machine
// against the memory measured.
func (e *Engine) startedLocalLocked(t *task) {
	if e.cfg.Memory == nil {
		return
	}
	if p := e.providerLocked(t.provider); p != nil && p.Name() == "local" {
		e.mem.reserved += newShellReserve
	} else {
		e.mem.reserved += newAgentReserve
	}
}

// watchLoop, about once a second until Shutdown, measures the machine's
// memory and the workers' trees (tasks waiting for memory start when it
// returns; a worker over its limit is stopped) and ends the rate-limit
// holds whose time has come.
func (e *Engine) watchLoop() {
	defer e.runWG.Done()
	tick := time.NewTicker(memInterval)
	defer tick.Stop()
	for {
		if e.cfg.Memory != nil {
			e.measureMemory()
		}
		e.mu.Lock()
		e.releaseRateHoldsLocked(time.Now())
		e.mu.Unlock()
		select {
		case <-e.admitStop:
			return
		case <-tick.C:
		}
	}
}

// measureMemory takes one measure (without e.mu: it reads /proc) and acts
// on it.
func (e *Engine) measureMemory() {
	m := e.cfg.Memory
	e.mu.Lock()
	running := false
	for _, w := range e.workers {
		if w.host != nil && w.hostName == "" {
			running = true
			break
		}
	}
	e.mu.Unlock()
	var rss map[string]uint64
	if running {
		rss = m.Workers()
	}
	avail, known := m.Available()

	e.mu.Lock()
	defer e.mu.Unlock()
	e.mem = memState{avail: avail, known: known, rss: rss}
	limit := uint64(e.limits.WorkerMemoryMiB) << 20
	for _, w := range e.workers {
		if w.host == nil || w.hostName != "" {
			if w.rss != 0 { // settled: it holds nothing now
				w.rss = 0
				e.changedLocked()
			}
			continue
		}
		b := rss[w.id]
		if int64(b) != w.rss {
			w.rss = int64(b)
			e.changedLocked()
		}
		if limit > 0 && b > limit && w.cancel != nil && !w.overMemory {
			w.overMemory = true
			why := fmt.Sprintf("stopped: its processes held %d MiB, over limits.workerMemoryMiB (%d MiB)", b>>20, e.limits.WorkerMemoryMiB)
			e.systemLineLocked(w.id, why)
			e.activityLocked(w.id, protocol.HubMemory, why)
			w.cancel(errOverMemory{why})
		}
	}
	if slices.ContainsFunc(e.tasks, waitsForMemory) {
		e.retryMemoryWaitsLocked()
	}
}

// errOverMemory is why a worker over its memory limit was stopped; it is
// the task's failure reason as it is.
type errOverMemory struct{ why string }

func (e errOverMemory) Error() string { return e.why }

// limitNames are /limits' names, in the order it lists them.
var limitNames = []string{"minFreeMemoryMiB", "workerMemoryMiB", "stallRetries", "rateLimitMaxWaitMs"}

// cmdLimits: /limits [NAME VALUE]. A change lasts for the session.
func (e *Engine) cmdLimits(args string) (string, error) {
	f := strings.Fields(args)
	switch len(f) {
	case 0:
		var b strings.Builder
		b.WriteString("Limits of this session (/limits NAME VALUE changes one until the fleet stops; config.json's limits set them at start):\n")
		vals := e.limitValuesLocked()
		for _, n := range limitNames {
			fmt.Fprintf(&b, "  %-18s %s\n", n, vals[n])
		}
		if e.mem.known {
			fmt.Fprintf(&b, "Memory the fleet may use now: %d MiB.", e.mem.avail>>20)
		}
		return strings.TrimRight(b.String(), "\n"), nil
	case 2:
	default:
		return "", failure("Usage: /limits [NAME VALUE] (names: " + strings.Join(limitNames, ", ") + ")")
	}
	top := 1 << 20
	if f[0] == "rateLimitMaxWaitMs" {
		top = 7 * 24 * 3600 * 1000
	}
	v, err := strconv.Atoi(f[1])
	if err != nil || v < 0 || v > top {
		return "", failf("%s must be a whole number from 0 to %d, not %q.", f[0], top, f[1])
	}
	switch f[0] {
	case "minFreeMemoryMiB":
		e.limits.MinFreeMemoryMiB = v
		e.retryMemoryWaitsLocked()
	case "workerMemoryMiB":
		e.limits.WorkerMemoryMiB = v
	case "stallRetries":
		if v > 100 {
			return "", failf("stallRetries must be at most 100, not %d.", v)
		}
		e.limits.StallRetries = v
	case "rateLimitMaxWaitMs":
		e.limits.RateLimitMaxWait = time.Duration(v) * time.Millisecond
	default:
		return "", failf("No limit %q. /limits lists them.", f[0])
	}
	e.changedLocked()
	return fmt.Sprintf("%s is %d for this session.", f[0], v), nil
}

func (e *Engine) limitValuesLocked() map[string]string {
	off := func(v int, unit string) string {
		if v == 0 {
			return "0 (off)"
		}
		return strconv.Itoa(v) + unit
	}
	return map[string]string{
		"minFreeMemoryMiB":   off(e.limits.MinFreeMemoryMiB, " MiB"),
		"workerMemoryMiB":    off(e.limits.WorkerMemoryMiB, " MiB"),
		"stallRetries":       strconv.Itoa(e.limits.StallRetries),
		"rateLimitMaxWaitMs": fmt.Sprintf("%d (%s)", e.limits.RateLimitMaxWait.Milliseconds(), e.limits.RateLimitMaxWait),
	}
}

// workerStateLocked is what w is doing, for fleetState's state and
// stateReason, /workers, the consoles and the hub: the one place it is
// decided.
func (e *Engine) workerStateLocked(w *worker) (state, reason string) {
	switch w.status {
	case workerCompleted:
		return protocol.WorkerStateDone, ""
	case workerFailed:
		if t := e.taskByID[w.taskID]; t != nil {
			reason = t.reason
		}
		return protocol.WorkerStateFailed, reason
	}
	if h := w.host; h != nil && h.waiting() {
		return protocol.WorkerStateWaitingForOperator, "a request of its waits for an answer"
	}
	if w.host != nil && time.Now().Before(w.rateUntil) {
		return protocol.WorkerStateRateLimited, w.rateReason
	}
	if n := w.healing.Load(); n > 0 && w.host != nil {
		return protocol.WorkerStateStalled, fmt.Sprintf("healing, attempt %d of %d", n, e.limits.StallRetries)
	}
	if t := e.taskByID[w.taskID]; t != nil && waitsForMemory(t) {
		return protocol.WorkerStateWaitingForMemory, t.waitReason
	}
	return protocol.WorkerStateWorking, ""
}

// mib shows bytes in MiB for /workers.
func mib(b int64) string { return strconv.FormatInt(b>>20, 10) + " MiB" }
