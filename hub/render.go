package hub

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's limit on a message's text, in UTF-16 code
// units after entities are parsed. The hub counts the escaped HTML it sends,
// which is never shorter, so a message it sends always fits.
const MaxMessageLen = 4096

// esc makes untrusted text safe as Telegram HTML: control characters and
// bidi overrides the fleet or an agent might print (which could make a
// summary read as something else) become U+FFFD, newlines stay, then <, >,
// & and quotes are escaped.
func esc(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return html.EscapeString(strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			return '\uFFFD'
		}
		return r
	}, s))
}

// utf16Len is the length of s as Telegram counts it.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1)
	}
	return n
}

// split cuts escaped HTML text into pieces of at most limit UTF-16 units,
// preferring line breaks, never inside an entity (&amp;) or a rune. Tags are
// not split across pieces by the callers because the only markup they put in
// long text is a leading <b>…</b> header, which is short.
func split(text string, limit int) []string {
	var parts []string
	for utf16Len(text) > limit {
		cut := cutPoint(text, limit)
		if cut <= 0 {
			// The limit is smaller than the first rune or entity: cut after it.
			_, cut = utf8.DecodeRuneInString(text)
		}
		parts = append(parts, strings.TrimRight(text[:cut], "\n"))
		text = strings.TrimLeft(text[cut:], "\n")
	}
	if text != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}

// cutPoint returns a byte offset ≤ the first limit UTF-16 units of text: the
// last newline in the second half of that prefix if any, else the last
// space, else the prefix itself, moved back out of any &entity;.
func cutPoint(text string, limit int) int {
	units, end := 0, 0
	for i, r := range text {
		u := max(utf16.RuneLen(r), 1)
		if units+u > limit {
			break
		}
		units += u
		end = i + utf8.RuneLen(r)
	}
	prefix := text[:end]
	if i := strings.LastIndexByte(prefix, '\n'); i > end/2 {
		return i + 1
	}
	if i := strings.LastIndexByte(prefix, ' '); i > end/2 {
		return i + 1
	}
	if amp := strings.LastIndexByte(prefix, '&'); amp >= 0 && !strings.Contains(prefix[amp:], ";") {
		return amp
	}
	return end
}

// clip shortens plain text to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// oneLine turns text into one line for a button label or a list.
func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}
