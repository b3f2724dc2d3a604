// Package memtrim gives a process that mostly waits its memory back: the
// heap the Go runtime holds but does not use, and, on Linux, the pages of
// its own executable that only start-up touched.
//
// A Go binary's start-up runs every linked package's init and looks up
// the stack maps of whatever it calls; the kernel maps what it faults in
// 64 KiB or more at a time, so a 44 MB fleet binary is 22 MiB resident
// before it does anything. Those pages are clean copies of the file: the
// kernel reclaims them under pressure, but until then they count in the
// process's RSS. Dropping them (the way the Linux kernel frees its own
// __init sections after boot) leaves what the idle loop really uses, which
// is faulted back in from the page cache on its next touch.
package memtrim

import "runtime/debug"

// Release returns unused heap to the OS and drops the executable's
// read-only pages from the resident set (Linux). It never fails the
// caller: what it cannot drop stays resident, as before.
func Release() {
	debug.FreeOSMemory()
	dropImage()
}
