package hub

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscRemovesControlAndBidiKeepsNewlines(t *testing.T) {
	in := "ok\x00nul\x1b[31mred\x7fdel\u0085nel\r\nline2\ttab\rcr\u202Eevil\u2066iso\u200Frlm\u061Calm\u2028ls\u2029ps\nend"
	got := esc(in)
	for _, r := range got {
		if r != '\n' && unicode.IsControl(r) {
			t.Errorf("esc kept control character %U in %q", r, got)
		}
		if unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029' {
			t.Errorf("esc kept bidi/separator character %U in %q", r, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("esc kept %d newlines, want 2 (\\r\\n and \\n): %q", n, got)
	}
	if !strings.Contains(got, "line2 tab") {
		t.Errorf("a tab should become a space: %q", got)
	}
	// The visible text survives around what was replaced.
	for _, w := range []string{"ok", "nul", "red", "del", "nel", "line2", "cr", "evil", "iso", "rlm", "alm", "ls", "ps", "end"} {
		if !strings.Contains(got, w) {
			t.Errorf("esc lost %q: %q", w, got)
		}
	}
	// "\x1b[31m" must not keep its ESC: the replacement marks it.
	if !strings.Contains(got, "\uFFFD[31m") {
		t.Errorf("ESC should become U+FFFD: %q", got)
	}
}

func TestEscEscapesHTML(t *testing.T) {
	got := esc(`<script>alert("x" & 'y')</script>`)
	for _, c := range []string{"<", ">", `"`, "'"} {
		if strings.Contains(got, c) {
			t.Errorf("esc left %q in %q", c, got)
		}
	}
	// Every & starts an entity.
	if rest := entityRE.ReplaceAllString(got, ""); strings.Contains(rest, "&") {
		t.Errorf("esc left a bare & in %q", got)
	}
	if !strings.Contains(got, "&lt;script&gt;") || !strings.Contains(got, "&amp;") {
		t.Errorf("esc(%q) = %q", `<script>…&`, got)
	}
	if esc("plain text, ünïcödé 😀") != "plain text, ünïcödé 😀" {
		t.Errorf("esc changed plain text: %q", esc("plain text, ünïcödé 😀"))
	}
}

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{
		"":     0,
		"abc":  3,
		"é":    1,
		"€":    1,
		"😀":    2,
		"𝄞":    2,
		"a😀b":  4,
		"😀😀😀":  6,
		"\xff": 1, // an invalid byte is one U+FFFD
	} {
		if got := utf16Len(s); got != want {
			t.Errorf("utf16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

var entityRE = regexp.MustCompile(`&(amp|lt|gt|quot|#34|#39);`)

// checkSplit asserts split's contract for text and limit.
func checkSplit(t *testing.T, text string, limit int) []string {
	t.Helper()
	parts := split(text, limit)
	if len(parts) == 0 {
		t.Fatalf("split(%d) returned no parts", limit)
	}
	for i, p := range parts {
		if n := utf16Len(p); n > limit {
			t.Errorf("part %d is %d UTF-16 units, over the limit %d: %q", i, n, limit, p)
		}
		if !utf8.ValidString(p) {
			t.Errorf("part %d is cut inside a rune: %q", i, p)
		}
		// No & may be left without its complete entity (a cut entity
		// leaves "&am" at the end of one part and "p;" at the start of
		// the next).
		if rest := entityRE.ReplaceAllString(p, ""); strings.Contains(rest, "&") {
			t.Errorf("part %d has a cut entity: %q", i, p)
		}
		if strings.HasPrefix(strings.TrimLeft(p, "\n"), ";") || regexp.MustCompile(`^(amp|lt|gt|quot|#\d+);`).MatchString(p) {
			t.Errorf("part %d starts inside an entity: %q", i, p)
		}
	}
	noNL := func(s string) string { return strings.ReplaceAll(s, "\n", "") }
	if got, want := noNL(strings.Join(parts, "")), noNL(text); got != want {
		t.Errorf("split lost text: joined parts without newlines differ from the input\n got %q\nwant %q", got, want)
	}
	return parts
}

func TestSplitShortTextIsOnePart(t *testing.T) {
	for _, s := range []string{"", "hello", strings.Repeat("😀", 50)} {
		if parts := split(s, 100); len(parts) != 1 || parts[0] != s {
			t.Errorf("split(%q) = %q, want it whole", s, parts)
		}
	}
}

func TestSplitAstralNeverOverLimit(t *testing.T) {
	text := strings.Repeat("😀", 100) // 200 UTF-16 units, 400 bytes
	for _, limit := range []int{7, 8, 33, 199} {
		parts := checkSplit(t, text, limit)
		if len(parts) < 200/limit {
			t.Errorf("limit %d: %d parts, too few to hold 200 units", limit, len(parts))
		}
	}
	// Every full part of a limit-7 split holds 3 emoji (6 units): a
	// byte-counting split would hold 1, a rune-counting one 7.
	parts := split(text, 7)
	for _, p := range parts[:len(parts)-1] {
		if utf16Len(p) != 6 {
			t.Errorf("limit 7 should hold 3 emoji (6 units), got %q", p)
		}
	}
}

func TestSplitPrefersNewlines(t *testing.T) {
	a, b := strings.Repeat("a", 60), strings.Repeat("b", 60)
	// A newline at 60 and spaces later: the newline wins.
	text := a + "\n" + b[:20] + " " + b[20:]
	parts := checkSplit(t, text, 100)
	if len(parts) != 2 || parts[0] != a || parts[1] != b[:20]+" "+b[20:] {
		t.Errorf("split = %q, want the cut at the newline", parts)
	}
	// Without a newline, a space in the second half.
	text = a + " " + b
	parts = checkSplit(t, text, 100)
	if len(parts) != 2 || strings.TrimSpace(parts[0]) != a || parts[1] != b {
		t.Errorf("split = %q, want the cut at the space", parts)
	}
	// Lines are kept whole when they fit.
	lines := make([]string, 30)
	for i := range lines {
		lines[i] = strings.Repeat(string(rune('a'+i%26)), 9)
	}
	for _, p := range checkSplit(t, strings.Join(lines, "\n"), 95) {
		for _, l := range strings.Split(p, "\n") {
			if len(l) != 9 {
				t.Errorf("a line was cut: %q in part %q", l, p)
			}
		}
	}
}

func TestSplitNeverCutsAnEntity(t *testing.T) {
	for pad := 90; pad <= 100; pad++ {
		text := strings.Repeat("x", pad) + "&amp;&lt;&gt;&#34;" + strings.Repeat("y", 50)
		checkSplit(t, text, 97)
	}
	// Only entities, no break: every cut lands between two.
	checkSplit(t, strings.Repeat("&amp;", 100), 23)
	checkSplit(t, strings.Repeat("&#39;😀", 100), 29)
}

func TestSplitRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	atoms := []string{"a", "b", "word", " ", " ", "\n", "😀", "𝄞", "é", "&amp;", "&lt;", "&gt;", "&#34;", "&#39;", "<b>", "</b>"}
	for i := range 300 {
		var b strings.Builder
		for range rng.IntN(3000) {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		limit := 16 + rng.IntN(400)
		if i%10 == 0 {
			limit = MaxMessageLen
		}
		checkSplit(t, b.String(), limit)
	}
}

func TestSplitEscapedMessageFitsTelegram(t *testing.T) {
	// What the hub does with a long reply: esc, then split.
	raw := strings.Repeat("if a < b && c > \"d\" { 😀 }\n", 800)
	for _, p := range checkSplit(t, esc(raw), MaxMessageLen) {
		if utf16Len(p) > MaxMessageLen {
			t.Fatal("over the limit")
		}
	}
}

func TestClipAndOneLine(t *testing.T) {
	if got := clip("😀😀😀", 2); got != "😀😀…" {
		t.Errorf("clip = %q", got)
	}
	if got := clip("short", 10); got != "short" {
		t.Errorf("clip = %q", got)
	}
	if got := oneLine("a\n b\t\tc  ", 100); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
}
