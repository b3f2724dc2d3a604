// Package memstat reads the memory a fleet can still use and how much a
// worker's processes hold. On Linux it reads /proc and the cgroup v2 files;
// elsewhere both are unknown (ok false), and the fleet admits workers by
// count alone.
package memstat

// MiB is a mebibyte.
const MiB = 1 << 20

// Available returns the bytes the fleet may still use: the kernel's
// MemAvailable, or less when the fleet runs in a cgroup v2 with a memory
// limit (the limit less what the cgroup uses). ok is false when it cannot
// be read.
func Available() (bytes uint64, ok bool) { return available() }

// A Sampler measures marked process trees: every process whose environment
// carries Scope=ScopeValue and Name=V counts for V. Children inherit their
// parent's environment, so a worker's whole tree carries its mark, however
// it detached. A process's environment is read once (keyed by its pid and
// start time), so a sample reads little more than each process's stat.
// Not safe for concurrent use.
type Sampler struct {
	Name              string // e.g. AGENTS_FLEET_WORKER
	Scope, ScopeValue string // e.g. AGENTS_FLEET_SESSION and the session's id

	seen map[procKey]string // the value a process carries, "" for none
}

// procKey names one process across pid reuse.
type procKey struct {
	pid   int
	start uint64
}

// Sample returns the resident memory of each marked tree, in bytes. It is
// nil where processes cannot be read (not Linux).
func (s *Sampler) Sample() map[string]uint64 { return s.sample() }
