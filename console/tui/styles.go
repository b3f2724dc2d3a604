package tui

import "charm.land/lipgloss/v2"

// styles holds the lipgloss styles of the view. With colour off (NO_COLOR)
// paint returns its text untouched, so the view has no ANSI at all. Colours
// are the 16 basic ones, so they follow the terminal's own theme.
type styles struct {
	on bool

	title, bold, dim, italic      lipgloss.Style
	tabOn, tabOff                 lipgloss.Style
	sel, cursor, match, curMatch  lipgloss.Style
	good, warn, bad, info         lipgloss.Style
	badge, badgeWarn, badgeBad    lipgloss.Style
	banner, question              lipgloss.Style
	barOn, barFail, barOff, gauge lipgloss.Style
}

func newStyles(on bool) styles {
	s := lipgloss.NewStyle()
	return styles{
		on:        on,
		title:     s.Bold(true).Foreground(lipgloss.BrightWhite),
		bold:      s.Bold(true),
		dim:       s.Faint(true),
		italic:    s.Italic(true).Faint(true),
		tabOn:     s.Bold(true).Reverse(true),
		tabOff:    s.Faint(true),
		sel:       s.Reverse(true),
		cursor:    s.Reverse(true),
		match:     s.Foreground(lipgloss.Black).Background(lipgloss.Yellow),
		curMatch:  s.Bold(true).Foreground(lipgloss.Black).Background(lipgloss.BrightYellow),
		good:      s.Foreground(lipgloss.Green),
		warn:      s.Foreground(lipgloss.Yellow),
		bad:       s.Foreground(lipgloss.Red),
		info:      s.Foreground(lipgloss.Cyan),
		badge:     s.Bold(true).Foreground(lipgloss.Black).Background(lipgloss.Cyan),
		badgeWarn: s.Bold(true).Foreground(lipgloss.Black).Background(lipgloss.Yellow),
		badgeBad:  s.Bold(true).Foreground(lipgloss.BrightWhite).Background(lipgloss.Red),
		banner:    s.Bold(true).Foreground(lipgloss.Black).Background(lipgloss.Yellow),
		question:  s.Bold(true).Foreground(lipgloss.Yellow),
		barOn:     s.Foreground(lipgloss.Green),
		barFail:   s.Foreground(lipgloss.Red),
		barOff:    s.Faint(true),
		gauge:     s.Foreground(lipgloss.Cyan),
	}
}

// paint renders text in st when colour is on.
func (s styles) paint(st lipgloss.Style, text string) string {
	if !s.on || text == "" {
		return text
	}
	return st.Render(text)
}

// status colours a worker or task status.
func (s styles) status(raw, shown string) string {
	switch raw {
	case "running", "in_progress", "active":
		return s.paint(s.good, shown)
	case "failed", "error", "cancelled":
		return s.paint(s.bad, shown)
	case "idle", "blocked", "pending", "waiting":
		return s.paint(s.warn, shown)
	case "completed", "done":
		return s.paint(s.dim, shown)
	}
	return shown
}
