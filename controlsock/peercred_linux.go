//go:build linux

package controlsock

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerUID returns the uid of the process at the other end of a Unix socket
// connection, or ok=false when the connection is not a Unix socket.
func peerUID(c net.Conn) (uid int, ok bool, err error) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, false, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, false, err
	}
	if serr != nil {
		if errors.Is(serr, syscall.ENOPROTOOPT) || errors.Is(serr, syscall.EOPNOTSUPP) {
			return 0, false, nil
		}
		return 0, false, serr
	}
	return int(cred.Uid), true, nil
}
