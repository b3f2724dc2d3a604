package registry

import (
	"errors"
	"fmt"
	"strings"
)

// Errors wrapped by Select, for callers that branch on the outcome.
var (
	// ErrNoFleet: no live fleet matches (or none is running).
	ErrNoFleet = errors.New("no running fleet")
	// ErrAmbiguous: several live fleets match; the message lists them.
	ErrAmbiguous = errors.New("ambiguous fleet")
)

// Select finds one live fleet (Err == nil and Alive) by selector, tried in
// this order: exact id, exact name, unique id prefix. An empty selector picks
// the only live fleet. Errors wrap ErrNoFleet or ErrAmbiguous and list the
// candidates, so the operator can pick one.
func Select(entries []Entry, selector string) (Entry, error) {
	var live []Entry
	for _, e := range entries {
		if e.Err == nil && e.Alive {
			live = append(live, e)
		}
	}
	if selector == "" {
		switch len(live) {
		case 0:
			return Entry{}, fmt.Errorf("%w", ErrNoFleet)
		case 1:
			return live[0], nil
		}
		return Entry{}, fmt.Errorf("%w: %d fleets are running; name one by id, id prefix or name:\n%s", ErrAmbiguous, len(live), describe(live))
	}
	for _, e := range live {
		if e.ID == selector {
			return e, nil
		}
	}
	for _, match := range []struct {
		what string
		ok   func(Entry) bool
	}{
		{"name", func(e Entry) bool { return e.Name == selector }},
		{"id prefix", func(e Entry) bool { return strings.HasPrefix(e.ID, selector) }},
	} {
		var found []Entry
		for _, e := range live {
			if match.ok(e) {
				found = append(found, e)
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		return Entry{}, fmt.Errorf("%w: %d fleets have %s %q; use the id:\n%s", ErrAmbiguous, len(found), match.what, selector, describe(found))
	}
	if len(live) == 0 {
		return Entry{}, fmt.Errorf("%w matches %q: none is running", ErrNoFleet, selector)
	}
	return Entry{}, fmt.Errorf("%w matches %q; running:\n%s", ErrNoFleet, selector, describe(live))
}

// describe lists entries one per line: id, name, cwd.
func describe(entries []Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  %s", e.ID)
		if e.Name != "" {
			fmt.Fprintf(&b, "  %s", e.Name)
		}
		if e.Cwd != "" {
			fmt.Fprintf(&b, "  (%s)", e.Cwd)
		}
	}
	return b.String()
}
