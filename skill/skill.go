// Package skill finds the fleet's skills: named instructions or task
// templates kept as files, NAME.md, in the repository's .fleet/skills/ and
// in <fleetHome>/skills/ (the repository's win). A skill's text either has
// a {task} placeholder (a template: the task goes there) or is
// instructions the task follows. Versions are the intel store's: each new
// content of a skill is its next version (docs/intel.md).
package skill

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// MaxSize bounds a skill file.
const MaxSize = 64 << 10

// ErrNotFound: no skill of that name in any directory.
var ErrNotFound = errors.New("no such skill")

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Valid says whether name can be a skill's name: 1–64 of [a-z0-9-],
// starting with a letter or digit (one path element).
func Valid(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q is not a skill name (1-64 characters of a-z, 0-9 and -)", name)
	}
	return nil
}

// Skill is one skill file.
type Skill struct {
	Name    string
	Path    string
	Content string
}

// Dirs are where skills live, first wins: <repo>/.fleet/skills (when
// repo is set) and <fleetHome>/skills.
func Dirs(repo, fleetHome string) []string {
	var dirs []string
	if repo != "" {
		dirs = append(dirs, filepath.Join(repo, ".fleet", "skills"))
	}
	return append(dirs, filepath.Join(fleetHome, "skills"))
}

// Find reads skill name from the first of dirs that has it.
func Find(dirs []string, name string) (Skill, error) {
	if err := Valid(name); err != nil {
		return Skill{}, err
	}
	for _, d := range dirs {
		p := filepath.Join(d, name+".md")
		s, err := read(p, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return s, err
	}
	return Skill{}, fmt.Errorf("%w %q (looked for %s.md in %s)", ErrNotFound, name, name, strings.Join(dirs, ", "))
}

func read(path, name string) (Skill, error) {
	f, err := os.Open(path)
	if err != nil {
		return Skill{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Skill{}, err
	}
	if !fi.Mode().IsRegular() {
		return Skill{}, fmt.Errorf("skill %s: %s is not a regular file", name, path)
	}
	if fi.Size() > MaxSize {
		return Skill{}, fmt.Errorf("skill %s: %s is %d bytes; the limit is %d", name, path, fi.Size(), MaxSize)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && fi.Size() > 0 {
		return Skill{}, fmt.Errorf("skill %s: %w", name, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return Skill{}, fmt.Errorf("skill %s: %s is empty", name, path)
	}
	return Skill{Name: name, Path: path, Content: string(b)}, nil
}

// List returns every skill of dirs by name (the first directory's wins),
// sorted; files that are not valid skills are left out.
func List(dirs []string) []Skill {
	seen := map[string]bool{}
	var out []Skill
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".md")
			if !ok || Valid(name) != nil || seen[name] {
				continue
			}
			if s, err := read(filepath.Join(d, e.Name()), name); err == nil {
				seen[name] = true
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Write replaces the skill file at path with content, atomically (a
// temporary file renamed over it), keeping its mode.
func Write(path, content string) error {
	if len(content) > MaxSize {
		return fmt.Errorf("write skill %s: %d bytes; the limit is %d", path, len(content), MaxSize)
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".skill-*")
	if err != nil {
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write skill %s: %w", path, err)
	}
	return nil
}
