//go:build !unix && !windows

package lockfile

// TryLock: there is no flock here; callers fall back (see ErrUnsupported).
func TryLock(path string) (*Lock, error) { return nil, ErrUnsupported }
