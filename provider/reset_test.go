package provider

import (
	"testing"
	"time"
)

func TestResetFromText(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	for text, want := range map[string]time.Time{
		"You've hit your session limit · resets 9:23pm (UTC)":                      time.Date(2026, 12, 2, 21, 23, 0, 0, time.UTC),
		"You've hit your usage limit. Upgrade to Pro (…) or try again at 9:23 PM.": time.Date(2026, 12, 2, 21, 23, 0, 0, time.UTC),
		"limit reached · resets 7am (UTC)":                                         time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC),
		"resets 12:05am (UTC)":                                                     time.Date(2026, 12, 3, 0, 5, 0, 0, time.UTC),
		"resets 19:30 (UTC)":                                                       time.Date(2026, 12, 3, 19, 30, 0, 0, time.UTC),
		"resets 9:23pm (Nowhere/Atlantis)":                                         time.Date(2026, 12, 2, 21, 23, 0, 0, time.UTC),
	} {
		got, ok := ResetFromText(text, now)
		if !ok || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", text, got, ok, want)
		}
	}
	for _, text := range []string{"API Error: 429 rate limited", "resets 25:00", "try again later"} {
		if got, ok := ResetFromText(text, now); ok {
			t.Errorf("%q: %v; want none", text, got)
		}
	}
}
