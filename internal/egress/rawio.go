package egress

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// relayConn reads and writes a tunnel's TCP connection by raw system
// calls on its non-blocking socket, waiting through the runtime's poller
// as net.Conn does. A socket that is not ready returns at once, so no
// call can hold the thread; what it saves is the scheduler's bookkeeping
// around a system call, which on a quiet proxy wakes the runtime's
// monitor thread on another core at the first call after every wait:
// some microseconds on each request and answer a tunnel carries.
type relayConn struct {
	net.Conn
	raw syscall.RawConn
}

// relay is c as a relayConn when it is a TCP connection, else c.
func relay(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &relayConn{Conn: c, raw: raw}
}

func (c *relayConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := c.call("read", c.raw.Read, func(fd uintptr) (uintptr, syscall.Errno) {
		r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		return r, e
	})
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (c *relayConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		p := b[done:]
		// send with MSG_NOSIGNAL: a peer gone is EPIPE, not a signal.
		n, err := c.call("write", c.raw.Write, func(fd uintptr) (uintptr, syscall.Errno) {
			r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
			return r, e
		})
		switch {
		case err != nil:
			return done, err
		case n <= 0:
			return done, c.opErr("write", io.ErrShortWrite)
		}
		done += n
	}
	return done, nil
}

// call makes sys on c's socket through wait (c.raw.Read or c.raw.Write):
// again at once when it is interrupted, and after the poller says the
// socket is ready when it would block.
func (c *relayConn) call(op string, wait func(func(uintptr) bool) error, sys func(fd uintptr) (uintptr, syscall.Errno)) (int, error) {
	var n int
	var errno syscall.Errno
	err := wait(func(fd uintptr) bool {
		r, e := sys(fd)
		for e == unix.EINTR {
			r, e = sys(fd)
		}
		n, errno = int(r), e
		return e != unix.EAGAIN
	})
	switch {
	case err != nil:
		return 0, c.opErr(op, err)
	case errno != 0:
		return 0, c.opErr(op, errno)
	}
	return n, nil
}

func (c *relayConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
