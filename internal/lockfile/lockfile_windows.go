package lockfile

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// openLockFile opens path, creating it user-only (winsec) if missing; a
// symbolic link or other reparse point is refused. It is shared for
// deleting, so that Release can delete it while it is held and a taker can
// have it open meanwhile. The lock is LockFileEx on the file's first byte,
// which Windows drops when the holder's handle closes or its process dies.
// A name that is still there but deleted (a holder's Release, while some
// handle to it is open, on a file system without POSIX deletes) is
// errNamePending: it goes once the last handle closes.
func openLockFile(path string) (*os.File, error) {
	sa, err := winsec.SecurityAttributes(false)
	if err != nil {
		return nil, err
	}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, sa,
		windows.OPEN_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return nil, fmt.Errorf("%w: %w", errNamePending, err)
	}
	if err != nil {
		return nil, err
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	if info.FileAttributes&(windows.FILE_ATTRIBUTE_REPARSE_POINT|windows.FILE_ATTRIBUTE_DIRECTORY) != 0 {
		windows.CloseHandle(h)
		return nil, errors.New("it is a link or a directory, not a lock file")
	}
	return os.NewFile(uintptr(h), path), nil
}

// fileStandardInfo is FILE_STANDARD_INFO: DeletePending says the file was
// deleted while handles to it are open.
type fileStandardInfo struct {
	AllocationSize, EndOfFile int64
	NumberOfLinks             uint32
	DeletePending, Directory  byte
}

// lockIfCurrent locks f, which was opened from path, and reports whether
// path still names f's file once the lock is held. If it does not, the
// lock is worthless and is dropped.
func lockIfCurrent(f *os.File, path string) (bool, error) {
	h := windows.Handle(f.Fd())
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(h, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol); err != nil {
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return false, ErrBusy
		}
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	var std fileStandardInfo
	if err := windows.GetFileInformationByHandleEx(h, windows.FileStandardInfo, (*byte)(unsafe.Pointer(&std)), uint32(unsafe.Sizeof(std))); err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if err == nil && std.DeletePending == 0 && os.SameFile(held, now) {
		return true, nil
	}
	// Deleted by a holder's Release: gone, or still there while a handle to
	// it is open (delete pending; opening it by name is then refused).
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	windows.UnlockFileEx(h, 0, 1, 0, new(windows.Overlapped))
	return false, nil
}
