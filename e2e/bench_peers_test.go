package e2e

// The forward proxies BenchmarkEgressProxy measures git sandbox's egress
// proxy against: Debian's squid and tinyproxy.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchProxy is a forward proxy the agent of BenchmarkEgressProxy goes
// through: its container (for its CPU time) and the address the agent
// reaches it at ("" for the sandbox's own, which the agent's environment
// names).
type benchProxy struct {
	name, container, addr string
}

// peerBinaries are the Debian programs run as peers, and what
// apt-get installs them.
var peerBinaries = map[string]string{"squid": "/usr/sbin/squid", "tinyproxy": "/usr/bin/tinyproxy"}

const squidConf = `http_port 3128
http_access allow all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log stdio:/dev/stderr
pid_filename none
coredump_dir none
netdb_filename none
error_directory /peer/errors
mime_table /peer/mime.conf
icon_directory /peer/icons
shutdown_lifetime 1 seconds
visible_hostname squid-peer
unlinkd_program /peer/bin/unlinkd
pinger_enable off
`

const tinyproxyConf = `Port 8888
Listen 0.0.0.0
Timeout 600
MaxClients 100
LogLevel Error
ConnectPort 80
`

// startPeerProxies runs squid and tinyproxy as forward proxies, each in a
// container of the test base image that joins the same two networks as
// the sandbox's own proxy (the egress network, then the sandbox's
// internal one), with no cache and no logging of requests. The programs
// are Debian's packages installed on this machine (apt-get install squid
// tinyproxy; the base image is the same Debian release): the binaries,
// the shared libraries the image lacks and squid's error templates are
// mounted read-only at /peer, nothing is installed in an image.
func startPeerProxies(b *testing.B, e *Env, egressNet, internal string) []benchProxy {
	b.Helper()
	dir := filepath.Join(e.Root, "peer")
	for _, d := range []string{"bin", "lib"} {
		must(b, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(b, os.Chmod(dir, 0o755))
	for name, bin := range peerBinaries {
		if _, err := os.Stat(bin); err != nil {
			b.Fatalf("%s is not installed here (%v): apt-get install -y squid tinyproxy (Debian's, as the test base image)", name, err)
		}
		copyPeerFile(b, bin, filepath.Join(dir, "bin", name))
		for _, lib := range peerLibraries(b, bin) {
			copyPeerFile(b, lib, filepath.Join(dir, "lib", filepath.Base(lib)))
		}
	}
	// squid's helper that it starts whatever its configuration says.
	copyPeerFile(b, "/usr/lib/squid/unlinkd", filepath.Join(dir, "bin", "unlinkd"))
	for _, c := range [][2]string{{"/usr/share/squid/errors/templates", "errors"}, {"/usr/share/squid/icons", "icons"}, {"/usr/share/squid/mime.conf", "mime.conf"}} {
		runOK(b, e.Root, nil, "cp", "-rL", c[0], filepath.Join(dir, c[1]))
	}
	must(b, os.WriteFile(filepath.Join(dir, "squid.conf"), []byte(squidConf), 0o644))
	must(b, os.WriteFile(filepath.Join(dir, "tinyproxy.conf"), []byte(tinyproxyConf), 0o644))
	return []benchProxy{
		runPeer(b, e, dir, egressNet, internal, "squid", "13:13", "3128", "/peer/bin/squid", "-N", "-f", "/peer/squid.conf"),
		runPeer(b, e, dir, egressNet, internal, "tinyproxy", "65534:65534", "8888", "/peer/bin/tinyproxy", "-d", "-c", "/peer/tinyproxy.conf"),
	}
}

// peerLibraries lists the shared libraries a program loads, but for the C
// library's own (the image's are used: the dynamic loader is the image's).
func peerLibraries(b *testing.B, bin string) []string {
	b.Helper()
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		b.Fatalf("ldd %s: %v", bin, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		_, path, ok := strings.Cut(line, "=> ")
		path, _, _ = strings.Cut(path, " (")
		base := filepath.Base(path)
		if !ok || !filepath.IsAbs(path) || strings.HasPrefix(base, "ld-linux") {
			continue
		}
		glibc := false
		for _, g := range []string{"libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "libresolv.so"} {
			glibc = glibc || strings.HasPrefix(base, g)
		}
		if !glibc {
			libs = append(libs, path)
		}
	}
	return libs
}

// copyPeerFile copies a file (through its symbolic links) to dst.
func copyPeerFile(b *testing.B, src, dst string) {
	b.Helper()
	data, err := os.ReadFile(src)
	must(b, err)
	must(b, os.WriteFile(dst, data, 0o755))
}

// runPeer runs one peer proxy as user, waits until the sandbox's agent
// can connect to it, and returns it.
func runPeer(b *testing.B, e *Env, dir, egressNet, internal, name, user, port string, cmd ...string) benchProxy {
	b.Helper()
	ctr := fmt.Sprintf("git-sandbox-e2e-%s-%s", name, e.RepoID())
	args := []string{"run", "-d", "--name", ctr, "--label", "git-sandbox.repo=" + e.RepoID(), "--network", egressNet,
		"--user", user, "-e", "LD_LIBRARY_PATH=/peer/lib", "-v", dir + ":/peer:ro", baseImage}
	runOK(b, e.Root, nil, "docker", append(args, cmd...)...)
	b.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", ctr).Run() })
	runOK(b, e.Root, nil, "docker", "network", "connect", internal, ctr)
	p := benchProxy{name: name, container: ctr, addr: containerIP(b, ctr, internal) + ":" + port}
	deadline := time.Now().Add(time.Minute)
	for e.Sandbox("exec", "bench", "--", "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(p.addr, ":", "/", 1)).Code != 0 {
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", ctr).CombinedOutput()
			b.Fatalf("%s does not listen at %s:\n%s", name, p.addr, logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return p
}
