package hub

import (
	"fmt"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// BenchmarkRelayOutputLine is the main loop's cost for one line of worker
// output at verbose: the frame handed over, escaped, and queued in the
// chat's stream (coalesced, so no Bot API call per line). Its anchor,
// BenchmarkDecodeOutputLine, is decoding the same frame from the socket,
// which every console pays anyway (docs/performance.md).
func BenchmarkRelayOutputLine(b *testing.B) {
	e := newTestHub(b, Config{Verbosity: Verbose})
	f := e.addFleet("100-aaaaaaaa", "alpha")
	frames := make([]protocol.Message, 1024)
	for i := range frames {
		frames[i] = &protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: fmt.Sprintf("line %d of the build <ok> & done", i)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		e.h.handle(frameEvent{id: f.d.ID, gen: f.link.gen, m: frames[i%len(frames)]})
	}
}

func BenchmarkDecodeOutputLine(b *testing.B) {
	frame, err := protocol.Encode(&protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "line 1 of the build <ok> & done"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.Decode(frame[:len(frame)-1]); err != nil {
			b.Fatal(err)
		}
	}
}
