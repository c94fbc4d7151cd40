package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startSSHD starts an sshd of the test's own on 127.0.0.1 (its own host
// key, config, pid file; root logs in with a key made here) whose sessions
// see DOCKER_HOST=dockerHost, and returns the ssh:// address and an ssh
// wrapper that reaches it (GIT_SANDBOX_SSH). It is stopped, by its pid,
// when the test ends.
func startSSHD(t *testing.T, dockerHost string) (addr, sshWrapper string) {
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil && os.Geteuid() == 0 {
		// As engine.sh does for runsc: Debian's package, when apt is there.
		if _, aerr := exec.LookPath("apt-get"); aerr == nil {
			if exec.Command("apt-get", "install", "-y", "-qq", "openssh-server").Run() != nil {
				_ = exec.Command("apt-get", "update", "-qq").Run()
				_ = exec.Command("apt-get", "install", "-y", "-qq", "openssh-server").Run()
			}
		}
	}
	if _, err := os.Stat(sshd); err != nil || os.Geteuid() != 0 {
		notRunHere(t, "needs root and sshd", "apt-get install openssh-server, and run as root")
	}
	dir := t.TempDir()
	for _, k := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "client_key.pub"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600))
	port, err := freePort()
	must(t, err)
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
PidFile %s/sshd.pid
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
SetEnv DOCKER_HOST=%s
`, port, dir, dir, dir, dockerHost)
	must(t, os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600))
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sshd, "-D", "-f", filepath.Join(dir, "sshd_config"), "-E", filepath.Join(dir, "sshd.log"))
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	wrapper := filepath.Join(dir, "ssh")
	must(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nexec ssh -i %s/client_key -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \"$@\"\n", dir)), 0o755))
	Eventually(t, 20*time.Second, "sshd answers", func() bool {
		return exec.Command(wrapper, "-p", fmt.Sprint(port), "root@127.0.0.1", "true").Run() == nil
	})
	return fmt.Sprintf("ssh://root@127.0.0.1:%d", port), wrapper
}

// An engine reached over ssh (host = "ssh://…"): `ssh HOST docker system
// dial-stdio`, as the docker CLI does; start and land through it.
func TestCopyModeOverSSH(t *testing.T) {
	engineHost := startEngine2(t)
	addr, wrapper := startSSHD(t, engineHost)
	e := NewEnv(t)
	e.vars = append(e.vars, "GIT_SANDBOX_SSH="+wrapper)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n[[engine]]\nname = \"box\"\nhost = %q\n", baseImage, addr)
	e.MustSandbox("start", "sx", "--engine", "box", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", "echo over-ssh >s.txt")
	if ids := containersOn(t, engineHost, e.RepoID()); len(ids) == 0 {
		t.Errorf("nothing on the engine behind ssh")
	}
	if p := e.PsOf("sx"); !strings.HasPrefix(p.Worktree, "(volume ") {
		t.Errorf("an ssh:// engine in mode auto is not copy mode: %q", p.Worktree)
	}
	e.MustSandbox("land", "sx", "-m", "over ssh")
	if got := e.Git("show", "main:s.txt"); got != "over-ssh" {
		t.Errorf("main:s.txt = %q", got)
	}
}
