//go:build !unix && !windows

package lockfile

import "os"

// There is no file lock here: TryLock fails with ErrUnsupported and
// callers fall back (see ErrUnsupported).

func openLockFile(string) (*os.File, error) { return nil, ErrUnsupported }

func lockIfCurrent(*os.File, string) (bool, error) { return false, ErrUnsupported }
