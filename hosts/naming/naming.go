// Package naming holds the rules for what a worker host is enrolled with
// and reports: its name (a subject token, an account and a bucket name),
// its slots and its labels. It depends on nothing of NATS, so the engine
// can check a pin (/spawn --host, --label) without importing the hub.
package naming

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	labelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// Bounds of what a host is enrolled with and reports.
const (
	MinSlots     = 1
	MaxSlots     = 256
	DefaultSlots = 4
	MaxLabels    = 32
)

// CheckName says whether name can name a host: it becomes a subject token,
// an account and a bucket name, so it is 1-63 of a-z, 0-9 and '-', not
// starting with '-'.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("host name %q: use 1-63 lower-case letters, digits and '-', starting with a letter or digit", name)
	}
	return nil
}

// CheckSlots bounds a host's slots.
func CheckSlots(n int) error {
	if n < MinSlots || n > MaxSlots {
		return fmt.Errorf("slots must be between %d and %d, got %d", MinSlots, MaxSlots, n)
	}
	return nil
}

// ParseLabels splits a comma-separated list ("gpu,big") into checked,
// de-duplicated labels; "" is none.
func ParseLabels(list string) ([]string, error) {
	var out []string
	for l := range strings.SplitSeq(list, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out, CheckLabels(out)
}

// CheckLabels checks labels as ParseLabels makes them.
func CheckLabels(labels []string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("at most %d labels, got %d", MaxLabels, len(labels))
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return fmt.Errorf("label %q: use 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit", l)
		}
	}
	return nil
}
