package memtrim

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"
)

// presentPages counts the pages of ms mapped in this process now, from
// /proc/self/pagemap (bit 63 of each page's entry: present in RAM).
func presentPages(t *testing.T, pagemap *os.File, ms []mapping) int {
	t.Helper()
	n, page := 0, uintptr(os.Getpagesize())
	buf := make([]byte, 8*512)
	for _, m := range ms {
		for a := m.start; a < m.end; a += 512 * page {
			pages := min((m.end-a)/page, 512)
			b := buf[:8*pages]
			if _, err := pagemap.ReadAt(b, int64(a/page*8)); err != nil {
				t.Fatalf("reading /proc/self/pagemap: %v", err)
			}
			for i := 0; i < len(b); i += 8 {
				if binary.LittleEndian.Uint64(b[i:])>>63 == 1 {
					n++
				}
			}
		}
	}
	return n
}

// touchImage makes every page of the executable's read-only mappings
// resident, reading them through /proc/self/mem.
func touchImage(t *testing.T) {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var b [1]byte
	for _, m := range imageMappings(maps, exe) {
		for a := m.start; a < m.end; a += uintptr(os.Getpagesize()) {
			if _, err := mem.ReadAt(b[:], int64(a)); err != nil {
				t.Fatalf("reading the executable's page at %#x: %v", a, err)
			}
		}
	}
}

func TestReleaseDropsTheExecutablesPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	image := imageMappings(bytes.NewReader(maps), exe)
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()

	touchImage(t)
	before := presentPages(t, pagemap, image)
	if before == 0 {
		t.Fatal("no page of the test binary's read-only mappings is present")
	}
	Release()
	after := presentPages(t, pagemap, image)
	total := 0
	for _, m := range image {
		total += int(m.end-m.start) / os.Getpagesize()
	}
	t.Logf("read-only mappings of the executable: %d pages, %d present before Release, %d after", total, before, after)
	if before != total {
		t.Fatalf("reading every page through /proc/self/mem left %d of %d absent", total-before, total)
	}
	// What runs between Release and the second look (the runtime, the
	// reads of pagemap) is faulted back in, 64 KiB or more at a time: in
	// this small binary that is about half of it. The rest must be gone.
	if after*4 > before*3 {
		t.Errorf("Release left %d of %d of the executable's pages present", after, before)
	}
}

func TestImageMappings(t *testing.T) {
	smaps := `00400000-01245000 r-xp 00000000 fe:00 10093611                           /opt/fleet bin/fleet
Size:              14612 kB
Rss:               10068 kB
Anonymous:             0 kB
01245000-02073000 r--p 00e45000 fe:00 10093611                           /opt/fleet bin/fleet
Size:              14520 kB
Anonymous:             0 kB
02073000-02074000 r--p 01c73000 fe:00 10093611                           /opt/fleet bin/fleet
Size:                  4 kB
Anonymous:             4 kB
02074000-02167000 rw-p 01c74000 fe:00 10093611                           /opt/fleet bin/fleet
Anonymous:           592 kB
02167000-0238d000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fe:00 42                         /opt/fleet bin/fleet2
7f0000002000-7f0000001000 r--p 00000000 fe:00 10093611                    /opt/fleet bin/fleet
zz-01 r--p 00000000 fe:00 10093611                                        /opt/fleet bin/fleet
7f6a7717e000-7f6a772d4000 r-xp 00028000 fe:00 1234                        /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
`
	got := imageMappings(strings.NewReader(smaps), "/opt/fleet bin/fleet")
	// The code and constants; not a written read-only page (RELRO), data,
	// other files or bad lines.
	want := []mapping{{0x400000, 0x1245000}, {0x1245000, 0x2073000}}
	if !slices.Equal(got, want) {
		t.Fatalf("imageMappings = %x, want %x", got, want)
	}
}
