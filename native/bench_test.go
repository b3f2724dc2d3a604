package native

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// benchRoots opens a store and n sessions, each with its bound root.
func benchRoots(b *testing.B, n int) (*Store, []*Controller) {
	st, err := Open(filepath.Join(b.TempDir(), "native.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cs := make([]*Controller, n)
	for i := range cs {
		if cs[i], err = New(b.Context(), st, fmt.Sprint("bench-", i), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	return st, cs
}

// drive alternates pause/resume on c's bound root with the right revisions,
// count times, recording each acknowledgement latency.
func drive(b *testing.B, c *Controller, count int, prefix string, lat []time.Duration) {
	root := c.BoundRoot()
	r := int64(1)
	for i := range count {
		action := protocol.NativePause
		if i%2 == 1 {
			action = protocol.NativeResume
		}
		rv := r
		start := time.Now()
		res := c.Handle(b.Context(), &protocol.NativeRequest{Action: action, RootID: root,
			OperationID: fmt.Sprint(prefix, i), ExpectedRevision: &rv})
		lat[i] = time.Since(start)
		if res.Kind != protocol.NativeKindReceipt {
			b.Errorf("mutation %d: %+v", i, res)
			return
		}
		r = res.Receipt.Revision
	}
}

func report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "mutations/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ack-ms")
}

// BenchmarkMutationsSequential: one root, pause/resume alternating, each
// mutation waiting for the previous acknowledgement (one fsync each).
func BenchmarkMutationsSequential(b *testing.B) {
	_, cs := benchRoots(b, 1)
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start := time.Now()
	drive(b, cs[0], b.N, "seq-", lat)
	report(b, lat, time.Since(start))
}

// BenchmarkMutations16Concurrent: 16 roots (one per session), one goroutine
// each alternating pause/resume; the writer group-commits what queues up.
func BenchmarkMutations16Concurrent(b *testing.B) {
	const n = 16
	_, cs := benchRoots(b, n)
	per := max(b.N/n, 1)
	lat := make([]time.Duration, per*n)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			drive(b, c, per, fmt.Sprint("c", i, "-"), lat[i*per:(i+1)*per])
		}()
	}
	wg.Wait()
	report(b, lat, time.Since(start))
}
