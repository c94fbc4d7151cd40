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
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		read := func() (uintptr, syscall.Errno) {
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			return r, e
		}
		r, e := read()
		for e == unix.EINTR {
			r, e = read()
		}
		n, errno = int(r), e
		return e != unix.EAGAIN // else wait until the socket is readable
	})
	switch {
	case err != nil:
		return 0, c.opErr("read", err)
	case errno != 0:
		return 0, c.opErr("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *relayConn) Write(b []byte) (int, error) {
	var done int
	for done < len(b) {
		var n int
		var errno syscall.Errno
		err := c.raw.Write(func(fd uintptr) bool {
			p := b[done:]
			// send with MSG_NOSIGNAL: a peer gone is EPIPE, not a signal.
			send := func() (uintptr, syscall.Errno) {
				r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
				return r, e
			}
			r, e := send()
			for e == unix.EINTR {
				r, e = send()
			}
			n, errno = int(r), e
			return e != unix.EAGAIN // else wait until the socket is writable
		})
		switch {
		case err != nil:
			return done, c.opErr("write", err)
		case errno != 0:
			return done, c.opErr("write", errno)
		case n <= 0:
			return done, c.opErr("write", io.ErrShortWrite)
		}
		done += n
	}
	return done, nil
}

func (c *relayConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

func (c *relayConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }
