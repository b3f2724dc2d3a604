package protocol

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Frames are bounded by MaxFrameSize once encoded, and JSON escaping makes
// a text up to six times longer than it is (a control character or an
// invalid byte is written as \u00XX or \ufffd). So limits on texts are
// counted in encoded bytes: EncodedLen measures a text as the codec writes
// it, CutText shortens one to a bound, visibly.

// MaxPromptText bounds a prompt's text, counted as EncodedLen (its JSON
// encoding, quotes excluded). The userMessage echo carries the text whole,
// with a source of at most 128 characters and a requestId of at most 256:
// under this bound the echo stays below MaxFrameSize whatever the text is
// made of. Every other frame derived from a prompt (task subjects, hub
// events, tool calls, hydrate entries) cuts it shorter with CutText.
const MaxPromptText = MaxFrameSize - 64<<10

// CheckPromptText reports, as an error safe to show, why text cannot be a
// prompt: it is longer than MaxPromptText once encoded. The fleet refuses
// such a prompt before anything is queued or saved; clients can check
// first.
func CheckPromptText(text string) error {
	if n := EncodedLen(text); n > MaxPromptText {
		return fmt.Errorf("the prompt is %d bytes as JSON (%d bytes of text; quotes, backslashes, control characters "+
			"and invalid UTF-8 take more once escaped), over the limit of %d bytes", n, len(text), MaxPromptText)
	}
	return nil
}

// EncodedLen returns the length of s as this package encodes it in a JSON
// string, quotes excluded: \" \\ \b \f \n \r \t take two bytes, other
// control characters, U+2028, U+2029 and each byte of invalid UTF-8 six
// (\u00XX, \u2028, \ufffd); everything else is written as is.
func EncodedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		w, size := unitLen(s[i:])
		n += w
		i += size
	}
	return n
}

// unitLen returns the encoded length of the first character of s (a byte
// of ASCII, a rune, or one byte of invalid UTF-8) and its size in s.
func unitLen(s string) (encoded, size int) {
	b := s[0]
	if b < utf8.RuneSelf {
		switch {
		case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
			return 2, 1
		case b < 0x20:
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return size, size
}

// cutMarker is what CutText appends: it says how many bytes were left out.
const cutMarker = "… [truncated %d bytes]"

// MinCut is the smallest bound CutText can honour for any text: room for
// its marker with the largest count.
const MinCut = len("… [truncated ") + 20 + len(" bytes]")

// CutText returns s when its EncodedLen is at most max. Otherwise it
// returns the longest prefix of s that ends on a character boundary and
// leaves room for a marker, followed by the marker "… [truncated N
// bytes]", where N counts the bytes of s left out: the result's EncodedLen
// is at most max. It is the one way the fleet shortens a text to fit a
// frame, so a reader always sees that, and how much, was cut. A max too
// small for the marker (under MinCut for the largest texts) gives "".
func CutText(s string, max int) string {
	if len(s) <= max/6 || len(s) <= max && plainASCII(s) {
		return s // nothing encodes to more than 6 bytes a byte
	}
	total := EncodedLen(s)
	if total <= max {
		return s
	}
	// The marker's length depends on N's digits; len(s) bounds N.
	room := max - (len(cutMarker) - 2 + len(strconv.Itoa(len(s))))
	if room < 0 {
		return ""
	}
	n, i := 0, 0
	for i < len(s) {
		w, size := unitLen(s[i:])
		if n+w > room {
			break
		}
		n += w
		i += size
	}
	return s[:i] + fmt.Sprintf(cutMarker, len(s)-i)
}

// plainASCII reports whether s is printable ASCII without '"' or '\\',
// which encodes as itself.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
