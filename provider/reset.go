package provider

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// resetText finds the clock time a CLI's limit message names: Claude's
// "resets 9:23pm (UTC)", Codex's "try again at 9:23 PM".
var resetText = regexp.MustCompile(`(?i)\b(?:resets(?: at)?|try again at)\s+(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?\s*(?:\(([^)]{1,40})\))?`)

// ResetFromText reads when a limit resets from a CLI's words, for when it
// gave no reset time otherwise: the next time after now that the clock
// shows what the text names, in the zone it names (in parentheses, when
// it is one this machine knows) or else in local time. ok is false when
// the text names none.
func ResetFromText(text string, now time.Time) (time.Time, bool) {
	m := resetText.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	hour, _ := strconv.Atoi(m[1])
	min := 0
	if m[2] != "" {
		min, _ = strconv.Atoi(m[2])
	}
	switch ampm := strings.ToLower(strings.ReplaceAll(m[3], ".", "")); {
	case ampm == "pm" && hour < 12:
		hour += 12
	case ampm == "am" && hour == 12:
		hour = 0
	}
	if hour > 23 || min > 59 {
		return time.Time{}, false
	}
	loc := now.Location()
	if z := strings.TrimSpace(m[4]); z != "" {
		if l, err := time.LoadLocation(z); err == nil {
			loc = l
		}
	}
	n := now.In(loc)
	at := time.Date(n.Year(), n.Month(), n.Day(), hour, min, 0, 0, loc)
	if !at.After(now) {
		at = at.AddDate(0, 0, 1)
	}
	return at, true
}
