package memtrim

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mapsLimit bounds what is read of /proc/self/maps (a Go process has a
// few dozen lines).
const mapsLimit = 1 << 20

// dropImage tells the kernel the executable's read-only mappings (its code,
// constants and symbol tables) are not needed now. For a private file
// mapping that was never written, MADV_DONTNEED only unmaps the pages:
// the next touch maps them again from the file. Writable mappings (data,
// heap) are left alone: dropping them would lose what they hold.
func dropImage() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	for _, m := range imageMappings(io.LimitReader(f, mapsLimit), exe) {
		// Errors are not worth reporting: the pages just stay resident.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED)
	}
}

type mapping struct{ start, end uintptr }

// imageMappings are the read-only, non-writable mappings of path in a
// /proc/PID/maps listing.
func imageMappings(r io.Reader, path string) []mapping {
	var out []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// 00400000-01245000 r-xp 00000000 fe:00 10093611    /path/to/fleet
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasSuffix(sc.Text(), " "+path) {
			continue
		}
		perms := fields[1]
		if len(perms) < 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out
}
