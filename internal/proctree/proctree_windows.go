//go:build windows

package proctree

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

func setGroup(cmd *exec.Cmd) {}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// group is a job object that kills its processes when its last handle
// closes: should the fleet die, Windows ends what the group runs.
type group struct {
	mu  sync.Mutex
	job windows.Handle // 0 once killed
}

// start starts cmd suspended, puts it in a new job, then lets it run:
// a process created while its parent is in a job is in the job too, so
// nothing cmd starts can be outside it (the job does not allow breaking
// away).
func (g *group) start(cmd *exec.Cmd) error {
	job, err := newJob()
	if err != nil {
		return err
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED
	if err := cmd.Start(); err != nil {
		windows.CloseHandle(job)
		return err
	}
	if err := adopt(job, uint32(cmd.Process.Pid)); err != nil {
		// It is still suspended, or in the job, whose closing ends it
		// and anything it started.
		_ = cmd.Process.Kill()
		windows.CloseHandle(job)
		_ = cmd.Wait()
		return err
	}
	g.job = job
	return nil
}

// newJob creates an unnamed job whose processes die when it closes.
func newJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("set job object limits: %w", err)
	}
	return job, nil
}

// adopt assigns the suspended process pid to job and resumes its thread.
// exec.Cmd keeps a handle to the process open, so pid names it still.
func adopt(job windows.Handle, pid uint32) error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, pid)
	if err != nil {
		return fmt.Errorf("open process %d: %w", pid, err)
	}
	err = windows.AssignProcessToJobObject(job, h)
	windows.CloseHandle(h)
	if err != nil {
		return fmt.Errorf("assign process %d to its job object: %w", pid, err)
	}
	return resume(pid)
}

// resume resumes the threads of pid, a process created suspended (one
// thread, which exec.Cmd does not keep a handle to).
func resume(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	defer windows.CloseHandle(snap)
	resumed := 0
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, terr := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if terr != nil {
			return fmt.Errorf("open thread %d of process %d: %w", te.ThreadID, pid, terr)
		}
		_, terr = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if terr != nil {
			return fmt.Errorf("resume thread %d of process %d: %w", te.ThreadID, pid, terr)
		}
		resumed++
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return fmt.Errorf("list threads: %w", err)
	}
	if resumed == 0 {
		return fmt.Errorf("process %d has no thread to resume", pid)
	}
	return nil
}

// kill terminates every process in the job and closes it; should a process
// be created meanwhile, the close ends it (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE).
func (g *group) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return
	}
	_ = windows.TerminateJobObject(g.job, 1)
	windows.CloseHandle(g.job)
	g.job = 0
}
