package store

import (
	"encoding/binary"
	"errors"

	"github.com/agents-fleet/fleet/protocol"
)

// Transcript chunks (migration 0002): Append stores each agent's lines of a
// batch as one row of transcript_chunks, whose data column is the lines in
// this encoding:
//
//	chunk = format byte (chunkFormat), line*
//	line  = ts delta (zigzag varint, from the previous line's ts, 0 for the
//	        first), role, stream, text
//	each string = uvarint length, the bytes exactly as given
//
// The agent is the row's, not repeated per line. A chunk's line count is the
// row's lines column; the encoding does not repeat it either.
const chunkFormat = 1

var errBadChunk = errors.New("corrupt transcript chunk")

// appendChunkLine appends l to the chunk being built in buf; prevTs is the
// ts of the chunk's previous line (0 for the first).
func appendChunkLine(buf []byte, prevTs int64, l *TranscriptLine) []byte {
	return appendChunkFields(buf, l.Ts-prevTs, string(l.Role), string(l.Stream), l.Text)
}

// appendChunkFields appends a line given by its fields (dts: its ts minus
// the previous line's), from strings or straight from a log record's bytes.
func appendChunkFields[S ~string | ~[]byte](buf []byte, dts int64, role, stream, text S) []byte {
	buf = binary.AppendVarint(buf, dts)
	buf = binary.AppendUvarint(buf, uint64(len(role)))
	buf = append(buf, role...)
	buf = binary.AppendUvarint(buf, uint64(len(stream)))
	buf = append(buf, stream...)
	buf = binary.AppendUvarint(buf, uint64(len(text)))
	return append(buf, text...)
}

// decodeChunkTail decodes the last len(dst) of the n lines of chunk data
// into dst, oldest first, with Agent set to agent. data may be reused by the
// caller afterwards (sql.RawBytes): the strings are copied, in one
// allocation for the whole tail.
func decodeChunkTail(data []byte, n int, agent string, dst []TranscriptLine) error {
	k := len(dst)
	if k > n || len(data) == 0 || data[0] != chunkFormat {
		return errBadChunk
	}
	// Skip the lines before the tail, keeping the running ts.
	p, ts := 1, int64(0)
	for range n - k {
		d, m := binary.Varint(data[p:])
		if m <= 0 {
			return errBadChunk
		}
		ts += d
		p += m
		for range 3 {
			if p = skipString(data, p); p < 0 {
				return errBadChunk
			}
		}
	}
	// One copy of the tail; the lines' strings point into it.
	tail := string(data[p:])
	p = 0
	for i := range dst {
		d, m := varintString(tail[p:])
		if m <= 0 {
			return errBadChunk
		}
		ts += d
		p += m
		var role, stream, text string
		if role, p = stringAt(tail, p); p < 0 {
			return errBadChunk
		}
		if stream, p = stringAt(tail, p); p < 0 {
			return errBadChunk
		}
		if text, p = stringAt(tail, p); p < 0 {
			return errBadChunk
		}
		dst[i] = TranscriptLine{Agent: agent, Role: protocol.Role(intern(role)), Stream: protocol.Stream(intern(stream)), Text: text, Ts: ts}
	}
	if p != len(tail) {
		return errBadChunk
	}
	return nil
}

// skipString returns the offset after the length-prefixed string at p of
// data, or -1.
func skipString(data []byte, p int) int {
	l, m := binary.Uvarint(data[p:])
	if m <= 0 || l > uint64(len(data)-p-m) {
		return -1
	}
	return p + m + int(l)
}

// stringAt returns the length-prefixed string at p of s and the offset
// after it, or -1.
func stringAt(s string, p int) (string, int) {
	l, m := uvarintString(s[p:])
	if m <= 0 || l > uint64(len(s)-p-m) {
		return "", -1
	}
	p += m
	return s[p : p+int(l)], p + int(l)
}

// uvarintString is binary.Uvarint on a string.
func uvarintString(s string) (uint64, int) {
	var x uint64
	var sh uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				return 0, -1 // overflow
			}
			return x | uint64(b)<<sh, i + 1
		}
		x |= uint64(b&0x7f) << sh
		sh += 7
	}
	return 0, 0
}

// varintString is binary.Varint on a string.
func varintString(s string) (int64, int) {
	ux, n := uvarintString(s)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// intern returns the constant for the usual roles and streams, so that a
// line with an empty text does not keep the chunk's copy alive for them.
func intern(s string) string {
	switch s {
	case "":
		return ""
	case "tool":
		return "tool"
	case "assistant":
		return "assistant"
	case "system":
		return "system"
	case "user":
		return "user"
	case "stdout":
		return "stdout"
	case "stderr":
		return "stderr"
	}
	return s
}
