package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The stream's lines are decoded lazily: a line is walked member by member
// at the top level and only the members a handler needs are decoded, so the
// 3 KB system/init line costs a scan of its bytes rather than a decode of
// its tool and skill lists. The walk checks the structure it passes over
// (balanced brackets, closed strings, well-formed literals), which is what
// tells a garbage line from a JSON one; it does not validate every escape or
// number of a value it skips.

var errSyntax = errors.New("not a JSON object")

// objectFields calls fn with the raw key (between its quotes, escapes
// undecoded) and the raw value of each member of the object b, in order,
// until fn returns false. It returns errSyntax when b is not a JSON object,
// however far fn got.
func objectFields(b []byte, fn func(key, val []byte) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errSyntax
		}
		end, ok := skipString(b, i)
		if !ok {
			return errSyntax
		}
		key := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		i = skipWS(b, i+1)
		vend, ok := skipValue(b, i)
		if !ok {
			return errSyntax
		}
		if !fn(key, b[i:vend]) {
			return nil
		}
		i = skipWS(b, vend)
		if i >= len(b) {
			return errSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return trailing(b, i+1)
		default:
			return errSyntax
		}
	}
}

// arrayElems calls fn with each raw element of the array b until fn returns
// false.
func arrayElems(b []byte, fn func(val []byte) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return trailing(b, i+1)
	}
	for {
		end, ok := skipValue(b, i)
		if !ok {
			return errSyntax
		}
		if !fn(b[i:end]) {
			return nil
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return errSyntax
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return trailing(b, i+1)
		default:
			return errSyntax
		}
	}
}

func trailing(b []byte, i int) error {
	if skipWS(b, i) != len(b) {
		return errSyntax
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string that starts at b[i]
// (a '"'). Short strings (keys, ids) are scanned byte by byte; longer ones
// jump from quote to quote.
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for end := min(j+32, len(b)); j < end; j++ {
		switch b[j] {
		case '"':
			return j + 1, true
		case '\\':
			j++ // the escaped byte
		}
	}
	if j > len(b) {
		return 0, false
	}
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j, true
		}
	}
}

// skipValue returns the index just past the JSON value that starts at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			j := i + 1
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			return j, true
		}
		return 0, false
	}
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func literal(b []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, false
	}
	return i + len(lit), true
}

// skipNested skips an object or array starting at b[i], counting brackets
// and skipping strings whole. Mismatched bracket kinds are caught by a
// small stack (depths beyond it are only counted).
func skipNested(b []byte, i int) (int, bool) {
	var stack [64]byte
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			end, ok := skipString(b, j)
			if !ok {
				return 0, false
			}
			j = end - 1
		case '{', '[':
			if depth < len(stack) {
				stack[depth] = c
			}
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return 0, false
			}
			if depth < len(stack) {
				open := stack[depth]
				if (c == '}' && open != '{') || (c == ']' && open != '[') {
					return 0, false
				}
			}
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// str decodes a raw JSON string value; ok is false when raw is not a
// string (null, a number…). Strings without escapes are copied straight.
func str(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// boolean decodes a raw JSON true; anything else is false.
func boolean(raw []byte) bool { return string(raw) == "true" }

// number decodes a raw JSON integer; anything else (null, a fraction, a
// string) is 0.
func number(raw []byte) int64 {
	var n int64
	if len(raw) == 0 {
		return 0
	}
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n
}

// field returns the raw value of the first top-level member of object b
// named name, or nil.
func field(b []byte, name string) []byte {
	var v []byte
	_ = objectFields(b, func(k, val []byte) bool {
		if string(k) == name { // keys with escapes never match: the CLI writes plain keys
			v = val
			return false
		}
		return true
	})
	return v
}
