package memtrim

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// smapsLimit bounds what is read of /proc/self/smaps (a Go process has a
// few dozen mappings of about 25 lines each).
const smapsLimit = 4 << 20

// dropImage tells the kernel the executable's read-only mappings (its code,
// constants and symbol tables) are not needed now. For a private file
// mapping whose pages were never written, MADV_DONTNEED only unmaps them:
// the next touch maps them again from the file. A mapping with any page
// written is left alone: a position-independent binary's relocated
// read-only data (RELRO) is written by the dynamic linker, then made
// read-only, and dropping it would bring back the unrelocated file.
// Writable mappings (data, heap) are never touched.
func dropImage() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	for _, m := range imageMappings(io.LimitReader(f, smapsLimit), exe) {
		// Errors are not worth reporting: the pages just stay resident.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED)
	}
}

type mapping struct{ start, end uintptr }

// imageMappings are the mappings of path in a /proc/PID/smaps listing that
// are private, readable and not writable, and none of whose pages was
// written (Anonymous: 0 kB).
func imageMappings(r io.Reader, path string) []mapping {
	var out []mapping
	last := false // the mapping whose fields are being read is out's last
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		// 00400000-01245000 r-xp 00000000 fe:00 10093611    /path/to/fleet
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			m, ok := candidate(line, fields, path)
			if ok {
				out = append(out, m)
			}
			last = ok
			continue
		}
		if last && len(fields) >= 2 && fields[0] == "Anonymous:" && fields[1] != "0" {
			out = out[:len(out)-1] // written: keep it
			last = false
		}
	}
	return out
}

// candidate parses a mapping's header line: path's, private, readable,
// not writable.
func candidate(line string, fields []string, path string) (mapping, bool) {
	if len(fields) < 6 || !strings.HasSuffix(line, " "+path) {
		return mapping{}, false
	}
	perms := fields[1]
	if len(perms) < 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
		return mapping{}, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, false
	}
	return mapping{uintptr(start), uintptr(end)}, true
}
