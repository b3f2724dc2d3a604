package protocol

import (
	"strconv"
	"unicode/utf8"
)

// Transcript frames are the hot path of the fan-out (every line a task
// prints), so they are encoded by hand, without reflection. The output is
// byte-for-byte what encoding/json produces for the same message (with HTML
// escaping off, as everywhere in this package); TestTranscriptFastPath and
// FuzzTranscriptFastPath hold it to that.

// appendTranscript appends the transcript frame, newline included, or
// fails with ErrFrameTooLarge when it is over limit bytes.
func appendTranscript(dst []byte, m *Transcript, limit int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"type":"transcript","role":`...)
	dst = appendJSONString(dst, string(m.Role))
	dst = append(dst, `,"text":`...)
	dst = appendJSONString(dst, m.Text)
	if m.Agent != "" {
		dst = append(dst, `,"agent":`...)
		dst = appendJSONString(dst, m.Agent)
	}
	if m.Ts != 0 {
		dst = append(dst, `,"ts":`...)
		dst = strconv.AppendInt(dst, m.Ts, 10)
	}
	if m.Stream != "" {
		dst = append(dst, `,"stream":`...)
		dst = appendJSONString(dst, string(m.Stream))
	}
	if m.Kind != "" {
		dst = append(dst, `,"kind":`...)
		dst = appendJSONString(dst, m.Kind)
	}
	dst = append(dst, '}')
	if len(dst)-start > limit {
		return dst[:start], ErrFrameTooLarge
	}
	return append(dst, '\n'), nil
}

const hexDigits = "0123456789abcdef"

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads s[0:8] as a little-endian word (one load once compiled).
func load64(s string) uint64 {
	_ = s[7] // one bounds check
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainWord reports whether none of the 8 bytes of x is a control
// character, '"', '\\' or a byte of a multi-byte UTF-8 sequence. It is the
// classic "has a zero byte" test applied to x-0x20, x^'"' and x^'\\', plus
// the high bits. It may report false for a plain word (a borrow across
// bytes), which only sends those bytes through the byte loop; it never
// reports true for a word that needs escaping. It and load64 are two
// functions because together they are over the inliner's budget, and a
// call per word costs more than the test.
func plainWord(x uint64) bool {
	t := (x - 0x20*lsb) | ((x ^ '"'*lsb) - lsb) | ((x ^ '\\'*lsb) - lsb)
	return (t&^x|x)&msb == 0
}

// appendJSONString appends s as a JSON string exactly as encoding/json does
// with SetEscapeHTML(false): \" \\ \b \f \n \r \t, other control
// characters as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs a second look (plain
		// printable ASCII other than '"' and '\\'): most output lines.
		for i+8 <= len(s) && plainWord(load64(s[i:i+8])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
