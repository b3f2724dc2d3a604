package claude

import (
	"context"
	"errors"
	"testing"

	"github.com/agents-fleet/fleet/provider"
)

// nopHost drops events and allows every tool.
type nopHost struct{}

func (nopHost) Event(provider.Event) {}
func (nopHost) Permission(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: true, OptionID: optAllow}, nil
}
func (nopHost) Ask(context.Context, provider.Question) (string, error) { return "", errors.New("no") }
func (nopHost) Confirm(context.Context, string) (bool, error)          { return false, errors.New("no") }

// BenchmarkParse maps the recorded two-turn stream (testdata/tour.jsonl)
// line by line, as the stdout goroutine does, permission relays and their
// answers included. Run with -cpu 1 for the one-core figure:
//
//	go test -run '^$' -bench Parse -cpu 1 ./provider/claude/
func BenchmarkParse(b *testing.B) {
	lines := readLines(b, "testdata/tour.jsonl")
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	o := newOffline(b, nopHost{}, provider.Spec{}, false)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		o.feed(lines)
	}
	b.ReportMetric(float64(len(lines))*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkParseLine is the stdout mapping alone for each kind of line in
// the recording (no permission lines: those are relays, not parsing).
func BenchmarkParseLine(b *testing.B) {
	lines := readLines(b, "testdata/tour.jsonl")
	kinds := map[string][]byte{}
	for _, l := range lines {
		e, err := parseEnvelope(l)
		if err != nil {
			b.Fatal(err)
		}
		k := rawStr(e.typ)
		if sub := rawStr(e.subtype); sub != "" {
			k += "/" + sub
		}
		if _, ok := kinds[k]; !ok && k != "control_request" && k != "result/success" && k != "system/init" {
			kinds[k] = l
		}
	}
	for k, l := range kinds {
		b.Run(k, func(b *testing.B) {
			o := newOffline(b, nopHost{}, provider.Spec{}, false)
			b.SetBytes(int64(len(l)))
			b.ReportAllocs()
			for b.Loop() {
				o.s.handleLine(l)
			}
		})
	}
}
