package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// tlogRecordBytes returns the record (header and body) that tlog.write
// makes of recs.
func tlogRecordBytes(t testing.TB, recs []Record, batch bool) []byte {
	t.Helper()
	b := new(tlog).encode(recs, batch)
	if b == nil {
		t.Fatal("record too large")
	}
	return slices.Clone(b)
}

// FuzzTlogRecord feeds arbitrary bytes to the transcript log's record
// reader and parser, as a damaged or foreign generation file would: they
// must never panic or read out of bounds, and what they accept must be
// lines that encode back to a record they read the same way.
func FuzzTlogRecord(f *testing.F) {
	f.Add(tlogRecordBytes(f, []Record{line("w1", "hello", 1), line("", "", -1)}, false))
	f.Add(tlogRecordBytes(f, []Record{line("w\xff", "x\x00y", 1<<62)}, true))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		var body []byte
		for {
			n, ok := readTlogRecord(r, &body)
			if !ok {
				return
			}
			if n != len(body) || n > maxTlogRecord {
				t.Fatalf("record of %d bytes, body %d", n, len(body))
			}
			lines, ok := parseTlogRecord(body, nil)
			if !ok {
				continue
			}
			// Encode the lines again and read them back.
			again := append([]byte{body[0]}, binary.AppendUvarint(nil, uint64(len(lines)))...)
			for _, l := range lines {
				again = binary.AppendUvarint(again, uint64(len(l.agent)))
				again = append(again, l.agent...)
				again = appendChunkFields(again, l.ts, l.role, l.stream, l.text)
			}
			back, ok := parseTlogRecord(again, nil)
			if !ok || !slices.EqualFunc(back, lines, func(a, b rawLine) bool {
				return bytes.Equal(a.agent, b.agent) && a.ts == b.ts && bytes.Equal(a.role, b.role) &&
					bytes.Equal(a.stream, b.stream) && bytes.Equal(a.text, b.text)
			}) {
				t.Fatalf("lines %v do not read back the same: %v", lines, back)
			}
		}
	})
}
