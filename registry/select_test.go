package registry

import (
	"errors"
	"strings"
	"testing"
)

func entry(id, name string) Entry {
	return Entry{Descriptor: Descriptor{ID: id, Name: name, Cwd: "/w/" + name}, Path: "/r/" + id + ".json", Alive: true}
}

func TestSelect(t *testing.T) {
	a := entry("100-aaaa1111", "alpha")
	b := entry("100-aaaa2222", "beta")
	c := entry("200-cccc0000", "twin")
	d := entry("300-dddd0000", "twin")
	dead := entry("400-eeee0000", "ghost")
	dead.Alive = false
	broken := entry("500-ffff0000", "broken")
	broken.Err = errors.New("malformed")
	// A name that is also a prefix of another fleet's id: the name wins.
	named := entry("600-abcd0000", "100")
	all := []Entry{a, b, c, d, dead, broken, named}

	tests := []struct {
		name     string
		entries  []Entry
		selector string
		want     string // id, or "" for an error
		wantErr  error
		mentions []string
	}{
		{"exact id", all, "100-aaaa1111", a.ID, nil, nil},
		{"unique prefix", all, "100-aaaa2", b.ID, nil, nil},
		{"short unique prefix", all, "2", c.ID, nil, nil},
		{"name", all, "alpha", a.ID, nil, nil},
		{"name beats prefix", all, "100", named.ID, nil, nil},
		{"ambiguous prefix", all, "100-aaaa", "", ErrAmbiguous, []string{a.ID, b.ID, "alpha", "beta"}},
		{"ambiguous name", all, "twin", "", ErrAmbiguous, []string{c.ID, d.ID}},
		{"dead fleet not selectable", all, "ghost", "", ErrNoFleet, []string{`"ghost"`, a.ID}},
		{"malformed not selectable", all, broken.ID, "", ErrNoFleet, nil},
		{"no match", all, "zzz", "", ErrNoFleet, []string{"running:", a.ID, "/w/alpha"}},
		{"none running", []Entry{dead, broken}, "", "", ErrNoFleet, nil},
		{"none running with selector", nil, "alpha", "", ErrNoFleet, []string{"none is running"}},
		{"only one", []Entry{dead, a, broken}, "", a.ID, nil, nil},
		{"several without selector", all, "", "", ErrAmbiguous, []string{"5 fleets are running", a.ID, b.ID, c.ID, d.ID, named.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(tt.entries, tt.selector)
			if tt.wantErr == nil {
				if err != nil || got.ID != tt.want {
					t.Fatalf("Select(%q) = %s, %v; want %s", tt.selector, got.ID, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Select(%q) = %s, %v; want %v", tt.selector, got.ID, err, tt.wantErr)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "  "+dead.ID) || strings.Contains(err.Error(), "  "+broken.ID) {
				t.Errorf("error %q lists a dead or malformed fleet", err)
			}
		})
	}
}
