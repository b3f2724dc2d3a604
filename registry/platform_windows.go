//go:build windows

package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// On Windows "private" is a security descriptor, not mode bits: what the
// fleet keeps (the fleet home, its control folder, the token file) is
// created with one that names the user as owner and as the only one let in
// (winsec.SDDL), passed to CreateDirectory and CreateFile; an access list
// is never set afterwards (between the creation and the change, the object
// would have the one it inherited). The checks read the owner and the
// access list back (winsec.CheckPrivate).

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

// secInfo is a FileInfo with the security descriptor of its file, which
// checkOwner and checkPrivate read.
type secInfo struct {
	fs.FileInfo
	sd  *windows.SECURITY_DESCRIPTOR
	err error // why sd could not be read
}

// lstat is os.Lstat, with the security descriptor of path read through a
// no-follow open of it.
func lstat(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	si := &secInfo{FileInfo: fi}
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		si.err = err
		return si, nil
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		si.err = err
		return si, nil
	}
	defer windows.CloseHandle(h)
	si.sd, si.err = winsec.Read(h)
	return si, nil
}

// fstat is f.Stat, with f's security descriptor.
func fstat(f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	si := &secInfo{FileInfo: fi}
	si.sd, si.err = winsec.Read(windows.Handle(f.Fd()))
	return si, nil
}

// security returns the security descriptor that lstat or fstat read with fi.
func security(fi fs.FileInfo) (*windows.SECURITY_DESCRIPTOR, error) {
	si, ok := fi.(*secInfo)
	if !ok {
		return nil, errors.New("no security descriptor was read")
	}
	return si.sd, si.err
}

// checkOwner returns an error unless fi, from lstat or fstat, belongs to
// the current user.
func checkOwner(fi fs.FileInfo) error {
	sd, err := security(fi)
	if err != nil {
		return fmt.Errorf("of unknown owner: %w", err)
	}
	return winsec.CheckOwner(sd)
}

// checkPrivate returns an error, phrased to follow "<what> <path> ", unless
// fi, from lstat or fstat, is owned by the user and its access list lets no
// one else in.
func checkPrivate(fi fs.FileInfo) error {
	sd, err := security(fi)
	if err != nil {
		return fmt.Errorf("is of unknown owner and access: %w", err)
	}
	return winsec.CheckPrivate(sd)
}

// mkdirAllPrivate creates dir and its missing parents, each user-only as
// it is created (CreateDirectory with winsec.SecurityAttributes; what is
// created inside inherits the user's access alone).
func mkdirAllPrivate(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllPrivate(parent); err != nil {
			return err
		}
	}
	sa, err := winsec.SecurityAttributes(true)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	if err := windows.CreateDirectory(p, sa); err != nil {
		// Made by someone else meanwhile: the caller checks it.
		if fi, serr := os.Lstat(dir); serr == nil && fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return nil
}

// restrictDir checks that the directory dir, open as f with fi from fstat,
// is the user's and lets no one else in. One that does is refused, not
// changed: it was not made by EnsurePrivateDir.
func restrictDir(dir string, _ *os.File, fi fs.FileInfo) error {
	if err := checkPrivate(fi); err != nil {
		return fmt.Errorf("private directory %s %w (remove it and it is made again, user-only)", dir, err)
	}
	return nil
}

// errReparsePoint is what openNoFollow refuses: a symbolic link, a junction
// or another reparse point.
var errReparsePoint = errors.New("a reparse point (symbolic link or junction); refusing to follow it")

// openNoFollow opens name without following a reparse point in its last
// element: one is refused. flag is os.O_RDONLY, or
// os.O_WRONLY|os.O_CREATE|os.O_EXCL to create a file that is user-only from
// its creation (winsec.SecurityAttributes; perm is not used). A directory
// opens too, so that openDir works and a directory where a file was
// expected is named as such.
func openNoFollow(name string, flag int, _ fs.FileMode) (*os.File, error) {
	var access, disposition uint32
	var sa *windows.SecurityAttributes
	switch flag {
	case os.O_RDONLY:
		access, disposition = windows.GENERIC_READ, windows.OPEN_EXISTING
	case os.O_WRONLY | os.O_CREATE | os.O_EXCL:
		var err error
		if sa, err = winsec.SecurityAttributes(false); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		access, disposition = windows.GENERIC_WRITE, windows.CREATE_NEW
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("open flags %#x: %w", flag, errors.ErrUnsupported)}
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	h, err := windows.CreateFile(p, access,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, sa, disposition,
		windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if info.FileAttributes&windows.FILE_ATTRIBUTE_REPARSE_POINT != 0 {
		windows.CloseHandle(h)
		return nil, &fs.PathError{Op: "open", Path: name, Err: errReparsePoint}
	}
	return os.NewFile(uintptr(h), name), nil
}

// openShared opens name for reading so that Remove can delete it
// meanwhile (FILE_SHARE_DELETE, which os.Open does not give).
func openShared(name string) (*os.File, error) { return openNoFollow(name, os.O_RDONLY, 0) }

// replaceBound bounds how long replaceFile waits for readers.
const replaceBound = 2 * time.Second

// replaceFile renames oldpath over newpath. Windows (and Wine) refuse to
// replace a file that anyone has open, FILE_SHARE_DELETE or not ("Access
// denied"): a List reads a descriptor for a moment, so the rename is tried
// again until replaceBound.
func replaceFile(oldpath, newpath string) error {
	deadline := time.Now().Add(replaceBound)
	for {
		err := os.Rename(oldpath, newpath)
		busy := errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_SHARING_VIOLATION)
		if !busy || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createPrivateTemp creates a new file in dir whose name starts with
// prefix, user-only from its creation (openNoFollow); os.CreateTemp's would
// have the access it inherits from dir (which Wine does not pass on).
func createPrivateTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		var b [8]byte
		rand.Read(b[:])
		f, err := openNoFollow(filepath.Join(dir, prefix+hex.EncodeToString(b[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// openDir opens the directory dir, refusing a reparse point.
func openDir(dir string) (*os.File, error) { return openNoFollow(dir, os.O_RDONLY, 0) }
