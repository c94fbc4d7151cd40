package proc

import (
	"context"
	"net"
	"os"
	"os/exec"
	"time"
)

// SSHEnv names the ssh program DialSSH runs instead of ssh (as GIT_SSH
// does for git), for an ssh that needs options of its own.
const SSHEnv = "GIT_SANDBOX_SSH"

// DialSSH reaches a Docker Engine on another machine through ssh: it runs
// `ssh [-l USER] [-p PORT] -- HOST docker system dial-stdio` and returns
// that process's stdin and stdout as one connection, as the docker CLI
// does for DOCKER_HOST=ssh://…. The user's own ssh configuration and
// agent apply; $GIT_SANDBOX_SSH, when set, is run instead of ssh.
func DialSSH(ctx context.Context, user, host, port string) (net.Conn, error) {
	args := []string{"-o", "ConnectTimeout=10", "-T"}
	if user != "" {
		args = append(args, "-l", user)
	}
	if port != "" {
		args = append(args, "-p", port)
	}
	args = append(args, "--", host, "docker", "system", "dial-stdio")
	// The connection outlives the dial's context; the process ends when
	// the connection is closed.
	prog := os.Getenv(SSHEnv)
	if prog == "" {
		prog = "ssh"
	}
	cmd := exec.Command(prog, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &cmdConn{cmd: cmd, r: stdout, w: stdin}, nil
}

// cmdConn is a process's stdout and stdin as a net.Conn.
type cmdConn struct {
	cmd *exec.Cmd
	r   interface{ Read([]byte) (int, error) }
	w   interface {
		Write([]byte) (int, error)
		Close() error
	}
}

func (c *cmdConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *cmdConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *cmdConn) Close() error {
	_ = c.w.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	return nil
}
func (c *cmdConn) LocalAddr() net.Addr              { return dummyAddr{} }
func (c *cmdConn) RemoteAddr() net.Addr             { return dummyAddr{} }
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "ssh" }
func (dummyAddr) String() string  { return "ssh" }
