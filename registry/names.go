package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/internal/lockfile"
)

// maxNameTries bounds ClaimName's search for a free name.
const maxNameTries = 1000

// ClaimName picks the name a fleet registering in dir goes by: base when no
// live fleet has it, else base-2, base-3 and so on; and holds it until
// release (a lock file under <dir>/.names that the kernel drops when the
// process dies), so that fleets starting at the same moment, before either
// has written its descriptor, do not take the same name. Fleets of builds
// that do not claim names are still seen through their descriptors. Where
// files cannot be locked (Windows) only the descriptors are checked.
func ClaimName(dir, base string) (name string, release func(), err error) {
	entries, err := Live(dir)
	if err != nil {
		return "", nil, err
	}
	taken := make(map[string]bool, len(entries))
	for _, e := range entries {
		taken[e.Name] = true
	}
	locks := filepath.Join(dir, ".names")
	if err := EnsurePrivateDir(dir); err != nil {
		return "", nil, fmt.Errorf("claim a fleet name: %w", err)
	}
	if err := EnsurePrivateDir(locks); err != nil {
		return "", nil, fmt.Errorf("claim a fleet name: %w", err)
	}
	for n := 1; n <= maxNameTries; n++ {
		cand := numbered(base, n)
		if taken[cand] {
			continue
		}
		sum := sha256.Sum256([]byte(cand))
		l, err := lockfile.TryLock(filepath.Join(locks, hex.EncodeToString(sum[:16])+".lock"))
		switch {
		case err == nil:
			return cand, l.Release, nil
		case errors.Is(err, lockfile.ErrBusy):
			continue // a fleet that is starting holds it
		case errors.Is(err, lockfile.ErrUnsupported):
			return cand, func() {}, nil
		default:
			return "", nil, fmt.Errorf("claim a fleet name: %w", err)
		}
	}
	return "", nil, fmt.Errorf("claim a fleet name: %q and %d numbered variants are all taken", base, maxNameTries-1)
}

// numbered is base for n = 1, else base-n, with base cut (at a rune
// boundary) so the name stays within MaxNameLen.
func numbered(base string, n int) string {
	if n == 1 {
		return base
	}
	suffix := "-" + strconv.Itoa(n)
	for len(base)+len(suffix) > MaxNameLen {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	return base + suffix
}
