package jsoneval

import (
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// reportPerFrame adds ns/frame for a benchmark whose op decodes n frames.
func reportPerFrame(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/frame")
}

// BenchmarkDecodeMixed decodes the 47-frame golden corpus (one op = the
// whole corpus) into the protocol message structs. protocol.Decode is the
// full decoder (type peek, required-field and kind checks, normalisation);
// the other rows are the bare library call, like protocol's
// BenchmarkDecodeMixedStdlib.
func BenchmarkDecodeMixed(b *testing.B) {
	corpus, _ := loadCorpus(b)
	benchDecode(b, corpus)
}

// BenchmarkDecodeClientFrames decodes only the client → server frames of
// the corpus (hello, prompt, confirmResponse, askResponse, ping, nativeRoot:
// 9 frames), the only frames the server decodes.
func BenchmarkDecodeClientFrames(b *testing.B) {
	corpus, _ := loadCorpus(b)
	var client []frame
	for _, f := range corpus {
		if protocol.FromClient(f.typ) {
			client = append(client, f)
		}
	}
	benchDecode(b, client)
}

// BenchmarkDecodeTranscript decodes the golden transcript frame, the most
// frequent frame a client (client.Conn.Next) decodes.
func BenchmarkDecodeTranscript(b *testing.B) {
	corpus, _ := loadCorpus(b)
	for _, f := range corpus {
		if f.name == "transcript" {
			benchDecode(b, []frame{f})
			return
		}
	}
	b.Fatal("no transcript frame")
}

// benchDecode runs protocol.Decode and each library on corpus; one op
// decodes every frame once.
func benchDecode(b *testing.B, corpus []frame) {
	total := 0
	for _, f := range corpus {
		total += len(f.data)
	}
	b.Run("protocol.Decode", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range corpus {
				if _, err := protocol.Decode(f.data); err != nil {
					b.Fatal(err)
				}
			}
		}
		reportPerFrame(b, len(corpus))
	})
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for _, f := range corpus {
					if err := c.unmarshal(f.data, f.new()); err != nil {
						b.Fatalf("%s: %v", f.name, err)
					}
				}
			}
			reportPerFrame(b, len(corpus))
		})
	}
}

// benchEncode runs one encode benchmark per library on v, plus
// protocol.Encode on m (the real path, newline included).
func benchEncode(b *testing.B, m protocol.Message, v any) {
	frame, err := protocol.Encode(m)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("protocol.Encode", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := protocol.Encode(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeFleetState encodes an 8-worker fleetState (about 2.6 KB).
// The libraries encode the method-less FleetStateFrame mirror.
func BenchmarkEncodeFleetState(b *testing.B) {
	fs := benchFleetState()
	benchEncode(b, fs, fleetStateFrame(fs))
}

// BenchmarkEncodeTranscript encodes a ~200-byte transcript. protocol.Encode
// takes the hand-written appendTranscript fast path.
func BenchmarkEncodeTranscript(b *testing.B) {
	benchEncode(b, benchTranscript, transcriptFrame(benchTranscript))
}

// BenchmarkEncodeFleetStateDropIn encodes *protocol.FleetState itself with
// each library, as a drop-in swap would: FleetState.MarshalJSON runs (and
// calls encoding/json), then the library checks/compacts its output. There
// is no "type" key (protocol.Encode adds it).
func BenchmarkEncodeFleetStateDropIn(b *testing.B) {
	fs := benchFleetState()
	for _, c := range codecs {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.marshal(fs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
