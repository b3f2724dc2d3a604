package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"workers", "workers", 0},
		{"worker", "workers", 1},
		{"wrokers", "workers", 1}, // a swap is one edit
		{"kitten", "sitting", 3},
		{"pth", "path", 1},
		{"flaw", "lawn", 2},
		{"über", "uber", 1}, // runes, not bytes
	} {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Distance(tt.b, tt.a); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"controlSocket", "telegramHub", "workers", "name", "limits", "providers", "path", "model"}
	for _, tt := range []struct {
		word, want string
	}{
		{"wrokers", "workers"},
		{"worker", "workers"},
		{"WORKERS", "workers"},
		{"controlsocket", "controlSocket"},
		{"controlSockets", "controlSocket"},
		{"control", "controlSocket"}, // cut short
		{"pth", "path"},
		{"nmae", "name"},
		{"modle", "model"},
		{"zzzzzz", ""},
		{"x", ""},
		{"telegram_hub", "telegramHub"},
	} {
		if got := Closest(tt.word, keys); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
	// Equally near: the first candidate wins.
	if got := Closest("nam", []string{"name", "nap"}); got != "name" {
		t.Errorf("Closest(nam) = %q, want name", got)
	}
	if got := Closest("anything", nil); got != "" {
		t.Errorf("Closest with no candidates = %q", got)
	}
}
