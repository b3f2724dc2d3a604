//go:build !windows

package local

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/provider"
)

// taskDir is the directory a test's task runs in.
func taskDir(t *testing.T) string { return t.TempDir() }

func TestOutputLinesExactlyAsPrinted(t *testing.T) {
	h := &fakeHost{}
	res := runCmd(t, `printf 'a\n\n  b  \nno newline'; printf 'e\n' >&2`, h)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := strings.Join(h.lines, "|")
	for _, want := range []string{"stdout:a", "stdout:", "stdout:  b  ", "stdout:no newline", "stderr:e"} {
		if !strings.Contains("|"+got+"|", "|"+want+"|") {
			t.Fatalf("missing %q in %q", want, got)
		}
	}
}

func TestExitCodeAndResultTail(t *testing.T) {
	h := &fakeHost{}
	res := runCmd(t, `seq 1 2000; exit 3`, h)
	if res.ExitCode != 3 || res.Err == nil {
		t.Fatalf("%+v", res)
	}
	r := h.results[0]
	if !r.IsError || utf8.RuneCountInString(r.Result) > ResultChars || !strings.HasSuffix(r.Result, "1999\n2000") {
		t.Fatalf("result %d chars, suffix %q", len(r.Result), r.Result[len(r.Result)-20:])
	}
}

func TestWorkflowLines(t *testing.T) {
	h := &fakeHost{answer: "prod", confirm: true}
	runCmd(t, `echo '::ask::{"question":"env?"}'; read a; echo "a=$a"; echo '::confirm::sure?'; read c; echo "c=$c"`, h)
	got := strings.Join(h.lines, "|")
	if got != "stdout:a=prod|stdout:c=yes" {
		t.Fatalf("%q", got)
	}
}

func TestMalformedAskClosesStdin(t *testing.T) {
	h := &fakeHost{answer: "x"}
	runCmd(t, `echo '::ask::{nope'; if read a; then echo "read"; else echo eof; fi`, h)
	if strings.Join(h.lines, "|") != "stdout:eof" || len(h.notes) != 1 || !strings.Contains(h.notes[0], "malformed") {
		t.Fatalf("lines %q notes %q", h.lines, h.notes)
	}
}

func TestOutputComesInBatches(t *testing.T) {
	h := &countingHost{fakeHost: fakeHost{confirm: true}}
	script := `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done > out.txt
cat out.txt; echo '::confirm::go on?'; read a; echo "got $a"; cat out.txt`
	res := runIn(t, context.Background(), &Provider{}, script, &h.fakeHost, h)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(h.lines) != 4001 || h.lines[1999] != "stdout:line 1999" || h.lines[2000] != "stdout:got yes" || h.lines[4000] != "stdout:line 1999" {
		t.Fatalf("%d lines: %q %q", len(h.lines), h.lines[1999:2001], h.lines[len(h.lines)-1])
	}
	if h.calls > 100 {
		t.Fatalf("%d Output calls for 4001 lines printed in two bursts", h.calls)
	}
}

type countingHost struct {
	fakeHost
	calls int
}

func (h *countingHost) Event(ev provider.Event) {
	if _, ok := ev.(provider.Output); ok {
		h.mu.Lock()
		h.calls++
		h.mu.Unlock()
	}
	h.fakeHost.Event(ev)
}

func TestCancelStopsEverything(t *testing.T) {
	h := &fakeHost{}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	// The background child keeps the stdout pipe open; the group kill ends it.
	res := runIn(t, ctx, &Provider{}, "sleep 30 & sleep 30", h, h)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("%+v", res)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancel did not stop the task group promptly")
	}
}

// A command longer than the kernel lets one argument be (128 KiB on
// Linux) runs, from a private script file that is gone afterwards; $0,
// the positional parameters and stdin (the ::ask:: answers) are as with
// `sh -c`.
func TestCommandLongerThanAnArgumentRuns(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	filler := ": '" + strings.Repeat("x", 300<<10) + "'\n"
	h := &fakeHost{answer: "prod"}
	res := runCmd(t, filler+`echo "args=$# zero=$0"; echo '::ask::{"question":"env?"}'; read a; echo "a=$a"; `+
		`ls -ld "$(dirname "$(ls -d "$TMPDIR"/fleet-command-*/command.sh)")" | cut -c1-10`, h)
	if res.Err != nil {
		t.Fatalf("%v (lines %q, notes %q)", res.Err, h.lines, h.notes)
	}
	if got := strings.Join(h.lines, "|"); got != "stdout:args=0 zero=sh|stdout:a=prod|stdout:drwx------" {
		t.Fatalf("%q", got)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("the script file's directory is left: %v", left)
	}

	// A NUL byte cannot stand in an argument either.
	h = &fakeHost{}
	if res := runCmd(t, "echo before\x00; echo after", h); res.Err != nil || strings.Join(h.lines, "|") != "stdout:before|stdout:after" {
		t.Fatalf("NUL: %+v %q", res, h.lines)
	}
}
