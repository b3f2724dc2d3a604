//go:build linux

package memstat

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procRoot and cgroupRoot are where the kernel's files are; tests point
// them at files of their own.
var (
	procRoot   = "/proc"
	cgroupRoot = "/sys/fs/cgroup"
)

func available() (uint64, bool) {
	avail, ok := memAvailable()
	if !ok {
		return 0, false
	}
	if room, ok := cgroupRoom(); ok && room < avail {
		avail = room
	}
	return avail, true
}

// memAvailable reads MemAvailable from /proc/meminfo.
func memAvailable() (uint64, bool) {
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest) // "812345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}

// cgroupRoom is what this process's cgroup v2 may still use: memory.max
// less memory.current, for the nearest cgroup up the tree that has a
// limit. ok is false without cgroup v2 or without a limit.
func cgroupRoom() (uint64, bool) {
	data, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return 0, false
	}
	var rel string
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok { // the v2 hierarchy
			rel = p
			break
		}
	}
	if rel == "" {
		return 0, false
	}
	best, found := uint64(0), false
	for dir := filepath.Join(cgroupRoot, filepath.Clean("/"+rel)); strings.HasPrefix(dir, cgroupRoot); dir = filepath.Dir(dir) {
		max, okMax := readUint(filepath.Join(dir, "memory.max"))
		cur, okCur := readUint(filepath.Join(dir, "memory.current"))
		if okMax && okCur {
			room := uint64(0)
			if max > cur {
				room = max - cur
			}
			if !found || room < best {
				best, found = room, true
			}
		}
		if dir == cgroupRoot {
			break
		}
	}
	return best, found
}

// readUint reads a cgroup file holding one number; "max" is no limit
// (ok false).
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

var pageSize = uint64(os.Getpagesize())

// maxSeen bounds the environments remembered; past it the memory starts
// over (each live process is read again once).
const maxSeen = 1 << 16

func (s *Sampler) sample() map[string]uint64 {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	if s.seen == nil || len(s.seen) > maxSeen {
		s.seen = map[procKey]string{}
	}
	name := []byte(s.Name + "=")
	scope := []byte("\x00" + s.Scope + "=" + s.ScopeValue + "\x00")
	out := map[string]uint64{}
	live := make(map[procKey]bool, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		start, rss, ok := readStat(pid)
		if !ok {
			continue
		}
		k := procKey{pid, start}
		live[k] = true
		v, known := s.seen[k]
		if !known {
			v = markOf(pid, name, scope)
			s.seen[k] = v
		}
		if v != "" {
			out[v] += rss * pageSize
		}
	}
	for k := range s.seen {
		if !live[k] {
			delete(s.seen, k)
		}
	}
	return out
}

// readStat reads a process's start time (clock ticks after boot) and
// resident set (pages) from /proc/PID/stat; ok is false for a process
// gone, or a zombie (which holds no memory).
func readStat(pid int) (start, rss uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22, rss field 24.
	if len(f) < 22 || f[0] == "Z" {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(f[19], 10, 64)
	rss, err2 := strconv.ParseUint(f[21], 10, 64)
	return start, rss, err1 == nil && err2 == nil
}

// markOf is the value of name in pid's environment when the environment
// also has the scope entry; "" otherwise (or when it cannot be read:
// another user's process).
func markOf(pid int, name, scope []byte) string {
	env, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "environ"))
	if err != nil || len(env) == 0 {
		return ""
	}
	if !bytes.HasPrefix(env, scope[1:]) && !bytes.Contains(env, scope) {
		return ""
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, name); ok {
			return string(v)
		}
	}
	return ""
}
