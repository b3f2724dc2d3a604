package registry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxTokenSize is the largest token file ReadToken reads.
const MaxTokenSize = 4 << 10

// tokenBytes is the number of random bytes in a token (hex-encoded: 64 chars).
const tokenBytes = 32

// EnsurePrivateDir creates dir (and missing parents) private to the user:
// mode 0700 on Unix; on Windows with a security descriptor that names the
// user alone (winsec.SDDL), given as each directory is created. An existing
// dir must be a directory, not a symlink, owned by the current user. On
// Unix a mode other than 0700 is set to 0700 through the opened directory
// (fchmod), so a directory swapped in after the check is never the one
// changed; on Windows one that lets anyone else in is refused, as its
// access list is never rewritten after the fact.
func EnsurePrivateDir(dir string) error {
	if dir == "" {
		return errors.New("private directory: empty path")
	}
	if err := mkdirAllPrivate(dir); err != nil {
		return fmt.Errorf("create private directory: %w", err)
	}
	f, err := openDir(dir)
	if err != nil {
		return explainOpen("private directory", dir, err)
	}
	defer f.Close()
	fi, err := fstat(f)
	if err != nil {
		return fmt.Errorf("private directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("private directory %s is not a directory", dir)
	}
	return restrictDir(dir, f, fi)
}

// CheckPrivateDir reports, without changing anything, whether dir is a
// directory only the user can use: on Unix owned by the user with mode
// 0700 or stricter, on Windows owned by the user with an access list that
// lets no one else in. The error follows "<dir> ", as in "… has mode 0755:
// group and others must have no access".
func CheckPrivateDir(dir string) error {
	fi, err := lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("is a %s, not a directory", kind(fi.Mode()))
	}
	return checkPrivate(fi)
}

// WriteToken creates a new random token (32 random bytes, hex = 64 chars) at
// path with O_CREATE|O_EXCL and mode 0600 (on Windows: user-only from its
// creation, see openNoFollow), and returns it. The directory is
// the caller's: use EnsurePrivateDir(ControlDir(fleetHome)) first.
func WriteToken(path string) (string, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	tok := hex.EncodeToString(b[:])
	f, err := openNoFollow(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	// The umask can only narrow 0600; set it exactly all the same.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(tok)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write token %s: %w", path, err)
	}
	return tok, nil
}

// ReadToken reads a token file, refusing one that is a symlink, not a regular
// file, not owned by the user, or has group/other permission bits (on
// Windows: lets anyone else in); trims
// whitespace; at most MaxTokenSize bytes; empty is an error.
func ReadToken(path string) (string, error) {
	f, err := openNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return "", explainOpen("token", path, err)
	}
	defer f.Close()
	fi, err := fstat(f)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if err := checkPrivateFile(fi); err != nil {
		return "", fmt.Errorf("token %s %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxTokenSize+1))
	if err != nil {
		return "", fmt.Errorf("read token %s: %w", path, err)
	}
	if len(data) > MaxTokenSize {
		return "", fmt.Errorf("token %s is over the limit of %d bytes", path, MaxTokenSize)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token %s is empty", path)
	}
	return tok, nil
}

// checkPrivateFile returns an error, phrased to follow "<what> <path> ",
// unless fi is a regular file that checkPrivate passes.
func checkPrivateFile(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("is a %s, not a regular file", kind(fi.Mode()))
	}
	return checkPrivate(fi)
}

// explainOpen turns a failed no-follow open of path into a clear error,
// naming a symlink as such rather than as ELOOP.
func explainOpen(what, path string, err error) error {
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s %s is a symbolic link; refusing to follow it", what, path)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// kind names the file type in m for error messages.
func kind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeNamedPipe:
		return "named pipe"
	}
	if m&fs.ModeDevice != 0 {
		return "device"
	}
	return "special file"
}
