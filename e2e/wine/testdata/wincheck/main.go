//go:build windows

// Command wincheck does, inside Wine, what the e2e/wine tests cannot see
// from Linux and fleet.exe has no command for. Each subcommand prints JSON
// objects, one a line, on stdout; the Linux test judges them. It exits 1
// (with the reason on stderr) only when it could not do its job.
//
//	wincheck hello PIPE TOKENFILE right|wrong   say hello with the token (or one hex digit off)
//	wincheck sd PIPE                            read the pipe's security descriptor back
//	wincheck watch ROOTPID EXE SECONDS          watch the task tree of EXE under ROOTPID end
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/winsec"
)

// bound bounds each wait of hello and sd.
const bound = 30 * time.Second

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: wincheck hello|sd|watch ARGS"))
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; {
	case cmd == "hello" && len(args) == 3:
		err = hello(args[0], args[1], args[2] == "wrong")
	case cmd == "sd" && len(args) == 1:
		err = sd(args[0])
	case cmd == "watch" && len(args) == 3:
		err = watch(args[0], args[1], args[2])
	default:
		err = fmt.Errorf("unknown command or wrong arguments: %q", os.Args[1:])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "wincheck:", err)
	os.Exit(1)
}

// emit prints v as one JSON line.
func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

// hello dials pipe, sends hello with the token in tokenFile (with its last
// hex digit changed when wrong, so that only the comparison can tell) and
// reports the first frame the fleet answers with and whether the fleet
// then closed the connection. The frames are read raw, not through the
// client package, to see the connection end.
func hello(pipe, tokenFile string, wrong bool) error {
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return fmt.Errorf("%s is empty", tokenFile)
	}
	if wrong {
		last := "0"
		if token[len(token)-1] == '0' {
			last = "1"
		}
		token = token[:len(token)-1] + last
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	nc, err := controlsock.Dial(ctx, pipe)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(bound))
	frame, err := json.Marshal(map[string]any{"type": "hello", "token": token, "clientKind": "other", "clientName": "wincheck", "protocolVersion": 1})
	if err != nil {
		return err
	}
	if _, err := nc.Write(append(frame, '\n')); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	first, err := readLine(r)
	if err != nil {
		return fmt.Errorf("read the answer to hello: %w", err)
	}
	// After an error frame the fleet must close the connection: read on
	// (a bounded number of frames) until it does or the deadline passes.
	// After a welcome it keeps it open; there is nothing more to learn.
	var end error
	if typ := frameType(first); typ != "welcome" {
		for range 64 {
			if _, end = readLine(r); end != nil {
				break
			}
		}
	}
	emit(map[string]any{"first": json.RawMessage(first), "closed": end != nil && !isTimeout(end), "end": errString(end)})
	return nil
}

// readLine reads one frame, at most 1 MiB.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull) && len(line) < 1<<20:
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, errors.New("a frame over 1 MiB")
		}
		return nil, err
	}
}

func frameType(frame []byte) string {
	var f struct {
		Type string `json:"type"`
	}
	json.Unmarshal(frame, &f)
	return f.Type
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sd opens pipe's client end and reports its security descriptor in SDDL,
// the current user's SID and the pid of the process serving the pipe.
func sd(pipe string) error {
	deadline := time.Now().Add(bound)
	h, err := winsec.OpenPipe(pipe)
	for errors.Is(err, windows.ERROR_PIPE_BUSY) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		h, err = winsec.OpenPipe(pipe)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", pipe, err)
	}
	defer windows.CloseHandle(h)
	var server uint32
	if err := windows.GetNamedPipeServerProcessId(h, &server); err != nil {
		return fmt.Errorf("the pipe's server: %w", err)
	}
	desc, err := winsec.Read(h)
	if err != nil {
		return err
	}
	user, err := winsec.UserSID()
	if err != nil {
		return err
	}
	emit(map[string]any{"sddl": desc.String(), "user": user.String(), "serverPid": server})
	return nil
}

type proc struct {
	PID  uint32 `json:"pid"`
	PPID uint32 `json:"ppid"`
	Exe  string `json:"exe"`
}

// watch waits (up to 60 s) for a process named exe that descends from
// rootPid, then watches the whole task tree it belongs to: the child of
// rootPid it descends from and everything under that. It reports each of
// them ("found"), then "watching"; then, once all have ended or seconds
// have passed, each one's end ("exited" with its exit code, or "running",
// and then it is terminated so that nothing outlives the test), and
// "done".
func watch(root, exe, seconds string) error {
	rootPid, err := strconv.ParseUint(root, 10, 32)
	if err != nil {
		return err
	}
	secs, err := strconv.Atoi(seconds)
	if err != nil || secs <= 0 {
		return fmt.Errorf("bad number of seconds %q", seconds)
	}
	var tree []proc
	deadline := time.Now().Add(60 * time.Second)
	for {
		procs, err := snapshot()
		if err != nil {
			return err
		}
		if tree = taskTree(procs, uint32(rootPid), exe); tree != nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s under process %d within 60s", exe, rootPid)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var handles []windows.Handle
	var watched []proc
	for _, p := range tree {
		h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_TERMINATE, false, p.PID)
		if err != nil {
			continue // ended in between
		}
		handles, watched = append(handles, h), append(watched, p)
	}
	// A pid can be given out again at once: keep only the processes that
	// are still those of the snapshot now that they are held open.
	procs, err := snapshot()
	if err != nil {
		return err
	}
	for i := 0; i < len(watched); i++ {
		if !slices.Contains(procs, watched[i]) {
			windows.CloseHandle(handles[i])
			handles, watched = append(handles[:i], handles[i+1:]...), append(watched[:i], watched[i+1:]...)
			i--
		}
	}
	if !slices.ContainsFunc(watched, func(p proc) bool { return strings.EqualFold(p.Exe, exe) }) {
		return fmt.Errorf("%s ended before it could be watched", exe)
	}
	for _, p := range watched {
		emit(map[string]any{"event": "found", "proc": p})
	}
	emit(map[string]any{"event": "watching"})

	end := time.Now().Add(time.Duration(secs) * time.Second)
	for i, h := range handles {
		wait := max(time.Until(end), 0)
		ev, err := windows.WaitForSingleObject(h, uint32(wait/time.Millisecond))
		if err != nil {
			return err
		}
		if ev != windows.WAIT_OBJECT_0 {
			emit(map[string]any{"event": "running", "proc": watched[i]})
			windows.TerminateProcess(h, 1)
			continue
		}
		var code uint32
		if err := windows.GetExitCodeProcess(h, &code); err != nil {
			return err
		}
		emit(map[string]any{"event": "exited", "proc": watched[i], "code": code})
	}
	for _, h := range handles {
		windows.CloseHandle(h)
	}
	emit(map[string]any{"event": "done"})
	return nil
}

func snapshot() ([]proc, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("process snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var out []proc
	pe := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &pe); err == nil; err = windows.Process32Next(snap, &pe) {
		out = append(out, proc{PID: pe.ProcessID, PPID: pe.ParentProcessID, Exe: strings.ToLower(windows.UTF16ToString(pe.ExeFile[:]))})
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return nil, fmt.Errorf("process snapshot: %w", err)
	}
	return out, nil
}

// taskTree returns the task tree of a process named exe under root (see
// watch), or nil when there is no such process.
func taskTree(procs []proc, root uint32, exe string) []proc {
	parent := make(map[uint32]uint32, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	for _, p := range procs {
		if !strings.EqualFold(p.Exe, exe) {
			continue
		}
		// Up the parents to root's child, at most as many steps as there
		// are processes (a reused pid can make a loop).
		top := p.PID
		for i := 0; i < len(procs) && parent[top] != root; i++ {
			top = parent[top]
		}
		if parent[top] != root {
			continue
		}
		var tree []proc
		for _, q := range procs {
			for a, i := q.PID, 0; i <= len(procs); a, i = parent[a], i+1 {
				if a == top {
					tree = append(tree, q)
					break
				}
				if a == root || a == 0 {
					break
				}
			}
		}
		return tree
	}
	return nil
}
