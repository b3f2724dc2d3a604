//go:build windows

package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"syscall"
)

// errUnsupported is returned where the Unix implementation relies on owners
// and mode bits; Windows needs ACL checks that are not written yet.
var errUnsupported = fmt.Errorf("%w: private files and directories are not supported on windows yet", errors.ErrUnsupported)

const (
	processQueryLimitedInformation = 0x1000
	stillActive                    = 259
)

// PidAlive reports whether a process with pid exists and has not exited.
func PidAlive(pid int) bool {
	if pid <= 0 || int64(pid) > math.MaxUint32 {
		return false
	}
	h, err := syscall.OpenProcess(processQueryLimitedInformation, false, uint32(pid))
	if err != nil {
		// The process exists but belongs to someone else.
		return errors.Is(err, syscall.ERROR_ACCESS_DENIED)
	}
	defer syscall.CloseHandle(h)
	var code uint32
	if err := syscall.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	return code == stillActive
}

func checkOwner(fs.FileInfo) error { return errUnsupported }

func openNoFollow(string, int, fs.FileMode) (*os.File, error) { return nil, errUnsupported }

func openDir(string) (*os.File, error) { return nil, errUnsupported }
