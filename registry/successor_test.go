//go:build !windows

// (Not run on Windows: it makes a symlink, which Wine fakes.)

package registry

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSuccessor(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	seen := time.UnixMilli(10_000)
	lost := Descriptor{ID: "1-lost", Name: "repo3", Cwd: dir, StartedAt: 5_000}
	entry := func(id, name, cwd string, started int64) Entry {
		return Entry{Descriptor: Descriptor{ID: id, Name: name, Cwd: cwd, StartedAt: started}, Alive: true}
	}
	cases := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"none", nil, ""},
		{"restart, same name", []Entry{entry("2-new", "repo3", dir, 11_000)}, "2-new"},
		{"same name started before the loss was seen", []Entry{entry("2-new", "repo3", dir, 9_000)}, "2-new"},
		{"same name, older than the lost fleet", []Entry{entry("2-old", "repo3", dir, 4_000)}, ""},
		{"other name, ran beside it", []Entry{entry("2-sib", "repo3-2", dir, 6_000)}, ""},
		{"other name, started after", []Entry{entry("2-res", "demo", dir, 10_500)}, "2-res"},
		{"other folder", []Entry{entry("2-else", "repo3", t.TempDir(), 11_000)}, ""},
		{"through a symlink", []Entry{entry("2-link", "repo3", link, 11_000)}, "2-link"},
		{"the lost fleet itself", []Entry{entry("1-lost", "repo3", dir, 5_000)}, ""},
		{"same name wins over newer", []Entry{entry("2-same", "repo3", dir, 11_000), entry("3-other", "demo", dir, 12_000)}, "2-same"},
		{"newest of the same name", []Entry{entry("2-a", "repo3", dir, 11_000), entry("3-b", "repo3", dir, 12_000)}, "3-b"},
	}
	for _, c := range cases {
		got, ok := Successor(lost, seen, c.entries)
		if c.want == "" && ok || c.want != "" && got.ID != c.want {
			t.Errorf("%s: successor %q (%v), want %q", c.name, got.ID, ok, c.want)
		}
	}
	if _, ok := Successor(Descriptor{ID: "1-x", Name: "repo3"}, seen, []Entry{entry("2-new", "repo3", dir, 11_000)}); ok {
		t.Error("a fleet with no folder has a successor")
	}
	if _, ok := Successor(lost, time.Time{}, []Entry{entry("2-res", "demo", dir, 10_500)}); ok {
		t.Error("never seen live, yet a fleet of another name was taken for its successor")
	}
}
