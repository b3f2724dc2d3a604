package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/console"
)

// Text helpers. Every string from a fleet goes through oneLine or
// textLines before it is stored for display or drawn; the formatting
// helpers (fmtDur, fmtTokens, plural…) keep numbers compact.

// oneLine cleans s for a single display line: line breaks and tabs become
// spaces, other control characters U+FFFD.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n\t") {
		s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
	}
	return console.Sanitize(s)
}

// textLines cleans s and splits it into lines, dropping trailing blank ones;
// it returns at least one line.
func textLines(s string) []string {
	s = strings.TrimRight(s, "\r\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = console.Sanitize(strings.TrimSuffix(p, "\r"))
	}
	return parts
}

// firstLine is the first non-blank line of s, cleaned, "…" marking more.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, rest, more := strings.Cut(s, "\n")
	line = console.Sanitize(strings.TrimSpace(line))
	if more && strings.TrimSpace(rest) != "" {
		line += " …"
	}
	return line
}

// lastLine is the last non-blank line of s, cleaned: an error's cause is
// usually at the end of the output.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	i := strings.LastIndexByte(s, '\n')
	line := console.Sanitize(strings.TrimSpace(s[i+1:]))
	if i >= 0 {
		line = "… " + line
	}
	return line
}

// clip bounds a stored feed field.
func clip(s string) string { return clipBytes(s, maxLineBytes) }

// clipBytes cuts s to at most n bytes on a rune boundary, marking the cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// clipRunes cuts s to at most n runes, marking the cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrapLines wraps s to w cells.
func wrapLines(s string, w int) []string {
	return strings.Split(ansi.Wrap(s, max(w, 4), ""), "\n")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fmtDur formats a duration compactly: 45ms, 1.2s, 12s, 5m10s, 1h02m, 3d04h.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second && d%time.Second != 0:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// fmtTokens formats a count compactly: 999, 12.3k, 1.2M.
func fmtTokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64) + "M"
}

func pct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "?"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + "%"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// prefix is the first n runes of s (a short id).
func prefix(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// plural is "1 file", "2 files", "3 entries".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") && !strings.HasSuffix(word, "ey") {
		return strconv.Itoa(n) + " " + word[:len(word)-1] + "ies"
	}
	return strconv.Itoa(n) + " " + word + "s"
}
