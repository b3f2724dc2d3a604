//go:build windows

package local

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
)

// taskDir is the directory a test's task runs in.
func taskDir(t *testing.T) string { return wineSafeTempDir(t) }

// wineSafeTempDir is t.TempDir for tests that run under Wine too: Wine 8
// fails os.RemoveAll ("unlinkat ...: Invalid function") while os.Remove
// of a file or an empty directory works, so its cleanup removes bottom up.
func wineSafeTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fleet-local-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeBottomUp(dir); err != nil {
			t.Errorf("remove the test's directory: %v", err)
		}
	})
	return dir
}

// removeBottomUp removes dir and what it holds, one os.Remove each.
func removeBottomUp(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() { // a link to a directory is not: it is removed, not followed
			if err := removeBottomUp(path); err != nil {
				return err
			}
		} else if err := os.Remove(path); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// The line reaches cmd as written: quotes stay (Go's quoting would have
// made them \"), & inside quotes is text, outside it separates commands,
// %VAR% expands; lines come without their CR.
func TestCmdGetsTheLineVerbatim(t *testing.T) {
	t.Setenv("FLEET_TEST_VAR", "v")
	h := &fakeHost{}
	res := runCmd(t, `echo "a b"& echo "c&d"& echo %FLEET_TEST_VAR%& echo err>&2`, h)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	// stdout and stderr are two pipes, read apart: each keeps its order,
	// not the order between them.
	var out, errs []string
	for _, l := range h.lines {
		if strings.HasPrefix(l, "stderr:") {
			errs = append(errs, l)
		} else {
			out = append(out, l)
		}
	}
	if got := strings.Join(out, "|") + " / " + strings.Join(errs, "|"); got != `stdout:"a b"|stdout:"c&d"|stdout:v / stderr:err` {
		t.Fatalf("%q", got)
	}
}

func TestCmdExitCode(t *testing.T) {
	h := &fakeHost{}
	res := runCmd(t, `echo out& exit /b 3`, h)
	if res.ExitCode != 3 || res.Err == nil || res.Err.Error() != "exit status 3" {
		t.Fatalf("%+v", res)
	}
	if len(h.results) != 1 || !h.results[0].IsError || h.results[0].Result != "out" {
		t.Fatalf("%+v", h.results)
	}
}

// A batch file reads the ::ask:: answer and the ::confirm:: one with
// `set /p`, whole: spaces kept, no CR left over.
func TestCmdAskAndConfirmReadBySetP(t *testing.T) {
	script := filepath.Join(wineSafeTempDir(t), "ask.cmd")
	batch := "@echo off\r\n" +
		"echo ::ask::{\"question\":\"env?\"}\r\n" +
		"set /p ANSWER=\r\n" +
		"echo answer=[%ANSWER%]\r\n" +
		"echo ::confirm::sure?\r\n" +
		"set /p OK=\r\n" +
		"echo ok=[%OK%]\r\n"
	if err := os.WriteFile(script, []byte(batch), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{answer: "prod eu", confirm: true}
	res := runBounded(t, `"`+script+`"`, h)
	if got := strings.Join(h.lines, "|"); res.Err != nil || got != "stdout:answer=[prod eu]|stdout:ok=[yes]" {
		t.Fatalf("%q (%+v)", got, res)
	}
}

// A malformed ::ask:: closes stdin: set /p reads nothing and does not wait.
func TestCmdMalformedAskClosesStdin(t *testing.T) {
	h := &fakeHost{answer: "x"}
	runBounded(t, `echo ::ask::{nope& set FLEET_A=none& set /p FLEET_A=& call echo a=%FLEET_A%`, h)
	if strings.Join(h.lines, "|") != "stdout:a=none" || len(h.notes) != 1 || !strings.Contains(h.notes[0], "malformed") {
		t.Fatalf("lines %q notes %q", h.lines, h.notes)
	}
}

// runBounded runs cmd like runCmd, interrupting it if it has not ended
// within the bound (a command waiting on stdin that never comes).
func runBounded(t *testing.T, cmd string, h *fakeHost) provider.TurnEnded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound)
	defer cancel()
	res := runIn(t, ctx, &Provider{}, cmd, h, h)
	if res.Interrupted {
		t.Fatalf("still running after %v (lines %q)", testwait.Bound, h.lines)
	}
	return res
}

// A command of several lines runs as a batch file, which is gone
// afterwards.
func TestCmdCommandOfSeveralLines(t *testing.T) {
	tmp := wineSafeTempDir(t)
	t.Setenv("TMP", tmp)
	t.Setenv("TEMP", tmp)
	h := &fakeHost{}
	res := runCmd(t, "set X=1\necho x=%X%\r\necho %~f0| findstr /e \\command.cmd >NUL && echo from the batch file", h)
	if got := strings.Join(h.lines, "|"); res.Err != nil || got != "stdout:x=1|stdout:from the batch file" {
		t.Fatalf("%q (%+v)", got, res)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "fleet-command-*")); len(left) != 0 {
		t.Fatalf("the batch file's directory is left: %v", left)
	}
}

// Interrupting the turn ends the whole tree: the cmd the task line starts,
// the cmd it starts and the ping that one starts (which would run 29 s).
func TestInterruptStopsTheWholeTree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type found struct {
		ping     windows.Handle
		cancelAt time.Time
	}
	ping := make(chan found, 1)
	go func() {
		defer cancel()
		var h windows.Handle
		if testwait.Until(testwait.Bound, func() bool { h = openDescendant("ping.exe"); return h != 0 }) {
			ping <- found{h, time.Now()}
		}
		close(ping)
	}()
	h := &fakeHost{}
	res := runIn(t, ctx, &Provider{}, "cmd /c ping -n 30 127.0.0.1", h, h)
	ended := time.Now()
	f, ok := <-ping
	if !ok {
		t.Fatalf("no ping.exe under this process within %v (lines %q)", testwait.Bound, h.lines)
	}
	defer windows.CloseHandle(f.ping)
	if !res.Interrupted || res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("%+v", res)
	}
	// The ping holds the output pipe: the turn ends once it is gone.
	if took := ended.Sub(f.cancelAt); took > 20*time.Second {
		t.Fatalf("the turn ended %v after the interrupt", took)
	}
	if ev, err := windows.WaitForSingleObject(f.ping, 0); ev != windows.WAIT_OBJECT_0 {
		t.Fatalf("the ping still runs after the turn ended (%#x %v)", ev, err)
	}
}

// openDescendant returns a handle to a process named exe (lower case) that
// descends from this one, or 0.
func openDescendant(exe string) windows.Handle {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return 0
	}
	defer windows.CloseHandle(snap)
	parent, name := map[uint32]uint32{}, map[uint32]string{}
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		parent[pe.ProcessID] = pe.ParentProcessID
		name[pe.ProcessID] = strings.ToLower(windows.UTF16ToString(pe.ExeFile[:]))
	}
	self := uint32(os.Getpid())
	for pid, n := range name {
		if n != exe {
			continue
		}
		// Up the parents, at most as many as there are processes (a
		// reused pid can make a loop).
		for p, i := parent[pid], 0; p != 0 && i < len(parent); p, i = parent[p], i+1 {
			if p == self {
				h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, pid)
				if err != nil {
					return 0
				}
				return h
			}
		}
	}
	return 0
}

func TestReadLinesDropsTheCR(t *testing.T) {
	var lines []string
	readLines(strings.NewReader("a\r\n\r\nb c\r\nlast"), func(ls []string) { lines = append(lines, ls...) })
	if got := strings.Join(lines, "|"); got != "a||b c|last" {
		t.Fatalf("%q", got)
	}
}

// The PowerShell command line carries the command exactly, quotes and line
// breaks included; a command too long for it is read from a script file
// that cleanup removes.
func TestPowerShellCommandLine(t *testing.T) {
	command := "echo \"a b\"\n$x = 'it''s'; Write-Output \"é $x\""
	sc, err := shellCommand("powershell", command)
	if err != nil {
		t.Fatal(err)
	}
	sc.cleanup()
	if got := decodeEncodedCommand(t, sc.cmd.SysProcAttr.CmdLine); got != command {
		t.Fatalf("decoded %q", got)
	}
	if !strings.HasPrefix(sc.cmd.SysProcAttr.CmdLine, "powershell.exe -NoLogo -NoProfile -NonInteractive -InputFormat None -EncodedCommand ") || sc.eol != "\r\n" {
		t.Fatalf("%q eol %q", sc.cmd.SysProcAttr.CmdLine, sc.eol)
	}

	long := strings.Repeat("# padding\n", 2000) + "Write-Output 'long'"
	sc, err = shellCommand("powershell", long)
	if err != nil {
		t.Fatal(err)
	}
	boot := decodeEncodedCommand(t, sc.cmd.SysProcAttr.CmdLine)
	_, path, ok := strings.Cut(boot, "ReadAllText('")
	path, _, ok2 := strings.Cut(path, "')")
	if !ok || !ok2 || !strings.HasPrefix(boot, ". ([ScriptBlock]::Create(") {
		t.Fatalf("bootstrap %q", boot)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != long {
		t.Fatalf("script file: %v (%d bytes)", err, len(b))
	}
	sc.cleanup()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("the script file's directory is left: %v", err)
	}
}

// decodeEncodedCommand returns the script of a -EncodedCommand command line.
func decodeEncodedCommand(t *testing.T, cmdLine string) string {
	t.Helper()
	i := strings.LastIndexByte(cmdLine, ' ')
	b, err := base64.StdEncoding.DecodeString(cmdLine[i+1:])
	if err != nil || len(b)%2 != 0 {
		t.Fatalf("not base64 UTF-16: %q (%v)", cmdLine[i+1:], err)
	}
	u := make([]uint16, len(b)/2)
	for j := range u {
		u[j] = binary.LittleEndian.Uint16(b[2*j:])
	}
	return string(utf16.Decode(u))
}

// A PowerShell task prints, asks and reads the answer from stdin. Wine 8's
// powershell.exe is a stub that runs nothing: the test says so and skips.
func TestPowerShellTask(t *testing.T) {
	if out, err := exec.Command("powershell.exe", "-NoProfile", "-Command", "Write-Output probe").Output(); err != nil || strings.TrimSpace(string(out)) != "probe" {
		t.Skipf("powershell.exe here runs no command (Wine's is a stub): %q %v", out, err)
	}
	h := &fakeHost{answer: "prod eu"}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound)
	defer cancel()
	res := runIn(t, ctx, &Provider{Shell: "powershell"}, `Write-Output '"a b"'; Write-Output '::ask::{"question":"env?"}'; $a = [Console]::In.ReadLine(); Write-Output "a=[$a]"`, h, h)
	if got := strings.Join(h.lines, "|"); res.Err != nil || got != `stdout:"a b"|stdout:a=[prod eu]` {
		t.Fatalf("%q (%+v)", got, res)
	}
}
