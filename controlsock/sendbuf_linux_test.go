package controlsock

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSendBufferIsSized checks each client connection's socket send
// buffer: larger than the system's default unless told to keep it.
func TestSendBufferIsSized(t *testing.T) {
	sndbuf := func(sendBuffer int) int {
		t.Helper()
		srv := New(Config{Token: testToken, Backend: &fakeBackend{}, SendBufferBytes: sendBuffer})
		ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cli, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		conn, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := conn.(*net.UnixConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		srv.ServeConn(conn, SurfaceSocket)
		var n int
		var gerr error
		raw.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}
	system, sized := sndbuf(-1), sndbuf(0)
	if sized <= system {
		t.Fatalf("send buffer %d with the default setting, %d with the system's", sized, system)
	}
	if asked := sndbuf(64 << 10); asked != 128<<10 {
		t.Fatalf("asked for 64 KiB, got %d (Linux doubles the value asked)", asked)
	}
}
