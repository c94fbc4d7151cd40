// Command dnswatch is the DNS witness of the egress tests: run in a
// container with CAP_NET_RAW in the network namespace it watches (the
// host's, or a proxy's), it prints the name of every DNS query it sees on
// any interface of that namespace, one a line, lower case and without the
// trailing dot: UDP or TCP to or from port 53, and anything sent to the
// engine's resolver (127.0.0.11, whose port the engine rewrites). It prints
// "ready" once it is capturing. IPv4 only.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

func main() {
	// ETH_P_ALL, in network byte order; cooked (SOCK_DGRAM): every packet
	// starts at its IP header, whatever the interface's link layer.
	const ethPAll = 0x0300
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM, ethPAll)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dnswatch: socket:", err)
		os.Exit(1)
	}
	if err := attachFilter(fd); err != nil {
		fmt.Fprintln(os.Stderr, "dnswatch: filter:", err)
		os.Exit(1)
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<20)
	fmt.Println("ready")
	buf := make([]byte, 65536)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			fmt.Fprintln(os.Stderr, "dnswatch: read:", err)
			os.Exit(1)
		}
		if name, ok := queryName(buf[:n]); ok {
			fmt.Println(name)
		}
	}
}

// attachFilter lets through only IPv4 UDP or TCP packets to or from port
// 53 or to 127.0.0.11, so that a busy host's other traffic is not copied
// (a full receive queue would drop the packets that matter).
func attachFilter(fd int) error {
	const (
		ldB   = syscall.BPF_LD | syscall.BPF_B | syscall.BPF_ABS
		ldW   = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS
		ldHX  = syscall.BPF_LD | syscall.BPF_H | syscall.BPF_IND
		ldxIP = syscall.BPF_LDX | syscall.BPF_B | syscall.BPF_MSH
		andK  = syscall.BPF_ALU | syscall.BPF_AND | syscall.BPF_K
		jeqK  = syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K
		ret   = syscall.BPF_RET | syscall.BPF_K
	)
	prog := []syscall.SockFilter{
		{Code: ldB, K: 0},                         // 0: version and header length
		{Code: andK, K: 0xf0},                     // 1
		{Code: jeqK, K: 0x40, Jt: 0, Jf: 10},      // 2: IPv4, else drop (13)
		{Code: ldB, K: 9},                         // 3: protocol
		{Code: jeqK, K: 17, Jt: 1, Jf: 0},         // 4: UDP → 6
		{Code: jeqK, K: 6, Jt: 0, Jf: 7},          // 5: TCP, else drop (13)
		{Code: ldW, K: 16},                        // 6: destination address
		{Code: jeqK, K: 0x7f00000b, Jt: 6, Jf: 0}, // 7: 127.0.0.11 → accept (14)
		{Code: ldxIP, K: 0},                       // 8: X = IP header length
		{Code: ldHX, K: 0},                        // 9: source port
		{Code: jeqK, K: 53, Jt: 3, Jf: 0},         // 10: → accept (14)
		{Code: ldHX, K: 2},                        // 11: destination port
		{Code: jeqK, K: 53, Jt: 1, Jf: 0},         // 12: → accept (14)
		{Code: ret, K: 0},                         // 13: drop
		{Code: ret, K: 0xffff},                    // 14: accept
	}
	fprog := syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := syscall.Syscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.SOL_SOCKET, syscall.SO_ATTACH_FILTER,
		uintptr(unsafe.Pointer(&fprog)), unsafe.Sizeof(fprog), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// queryName returns the first question's name of a DNS query carried by
// the IPv4 packet p.
func queryName(p []byte) (string, bool) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return "", false
	}
	ihl := int(p[0]&0x0f) * 4
	if len(p) < ihl {
		return "", false
	}
	var msg []byte
	switch p[9] {
	case 17:
		if len(p) < ihl+8 {
			return "", false
		}
		msg = p[ihl+8:]
	case 6:
		if len(p) < ihl+20 {
			return "", false
		}
		off := ihl + int(p[ihl+12]>>4)*4
		if len(p) < off+2 {
			return "", false
		}
		msg = p[off+2:] // after the two-byte length of DNS over TCP
	default:
		return "", false
	}
	// Header: id, flags (QR is the top bit), question count.
	if len(msg) < 12 || msg[2]&0x80 != 0 || binary.BigEndian.Uint16(msg[4:6]) == 0 {
		return "", false
	}
	var labels []string
	for i := 12; i < len(msg); {
		l := int(msg[i])
		if l == 0 {
			return strings.ToLower(strings.Join(labels, ".")), len(labels) > 0
		}
		if l&0xc0 != 0 || i+1+l > len(msg) {
			return "", false
		}
		labels = append(labels, string(msg[i+1:i+1+l]))
		i += 1 + l
	}
	return "", false
}
