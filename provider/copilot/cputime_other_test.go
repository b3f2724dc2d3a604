//go:build !unix

package copilot

import "time"

// cpuTime is unknown here; BenchmarkParse then reports wall time only.
func cpuTime() time.Duration { return 0 }
