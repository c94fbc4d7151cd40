package egress

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
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

// closeWrite half-closes c by a raw shutdown when it is a relayConn; the
// FIN it sends is delivered to the peer within the call, which on a
// bridge can take long enough for the runtime to hand the proxy's only P
// to another thread meanwhile.
func (c *relayConn) CloseWrite() error {
	var errno syscall.Errno
	err := c.raw.Control(func(fd uintptr) {
		_, _, errno = unix.RawSyscall(unix.SYS_SHUTDOWN, fd, unix.SHUT_WR, 0)
	})
	switch {
	case err != nil:
		return c.opErr("shutdown", err)
	case errno != 0:
		return c.opErr("shutdown", errno)
	}
	return nil
}

// rawConnect is the dialer's Control: it starts the connection to addr
// ("ip:port") by a raw connect on the dialer's new socket. The SYN's
// delivery runs within the call, and on a bridge the answer's too, so a
// connect through package syscall is a call long enough for the runtime
// to retake the proxy's only P and wake another thread to hold it (a
// handoff and back on every new upstream connection). net's own connect
// that follows finds the connection under way (EALREADY) or made
// (EISCONN), and waits for it through the poller as always.
func rawConnect(_ context.Context, _, addr string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().Zone() != "" {
		return nil // net connects as it would
	}
	ip := ap.Addr().Unmap()
	var errno syscall.Errno
	cerr := c.Control(func(fd uintptr) {
		if ip.Is4() {
			sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ip.As4()}
			putPort(&sa.Port, ap.Port())
			_, _, errno = unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)
			return
		}
		sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ip.As16()}
		putPort(&sa.Port, ap.Port())
		_, _, errno = unix.RawSyscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	})
	switch {
	case cerr != nil:
		return cerr
	case errno == 0, errno == unix.EINPROGRESS, errno == unix.EALREADY, errno == unix.EINTR:
		return nil
	case errno == unix.EAFNOSUPPORT, errno == unix.EINVAL:
		return nil // not a socket of the address's family: net connects as it would
	}
	return os.NewSyscallError("connect", errno)
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}
