package network

// Copy mode's egress proxy: on an engine that cannot see this machine's
// files, the proxy's configuration is loaded into a volume before each
// start, and its decision log is a volume too. The loading runs the
// proxy's own image (git-sandbox's __proxy-load), never the sandbox's: an
// image a repository chose would run next to the proxy's configuration.

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// proxyVolumes are a copy-mode proxy's two volumes.
type proxyVolumes struct {
	// Config holds its configuration (read-only to the proxy); Log its
	// decision log.
	Config, Log string
}

// ProxyOnVolumes replaces the proxy's host mounts with volumes.
func ProxyOnVolumes(p *EgressPlan) error {
	v := &proxyVolumes{Config: p.Proxy.Name + "-conf", Log: p.Proxy.Name + "-log"}
	spec := p.Proxy.Clone()
	spec.Mounts = []container.Mount{
		{Source: v.Config, Target: ProxyConfigDir, ReadOnly: true, Volume: true, NoCopy: true, Why: "the proxy's configuration (allow list), loaded at its start"},
		{Source: v.Log, Target: ProxyLogDir, Volume: true, NoCopy: true, Why: "the decision log, on the engine"},
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	p.Proxy, p.volumes = spec, v
	return nil
}

// Where the loader mounts the two volumes.
const (
	loadConfigDir = "/load"
	loadLogDir    = "/log"
)

// proxyLoadSpec is the container that loads the configuration: the
// proxy's image running git-sandbox __proxy-load, as root without
// capabilities (the owner of the volumes' roots, which it opens to the
// proxy's user for the log), with no network.
func (e *Env) proxyLoadSpec(branch string, p *EgressPlan) *container.Spec {
	load := &container.Spec{
		Name:          p.Proxy.Name + "-load",
		Image:         p.Proxy.Image,
		ToolImage:     true,
		Entrypoint:    []string{proxyBinary},
		Argv:          []string{"__proxy-load", "--config-dir", loadConfigDir, "--log-dir", loadLogDir},
		Env:           []string{"HOME=/nonexistent"},
		User:          "0:0",
		WorkDir:       "/",
		Network:       container.NetworkNone,
		Runtime:       p.Proxy.Runtime,
		ReadOnlyRoot:  true,
		NoHealthcheck: true,
		Limits:        container.Limits{Pids: 64, MemoryBytes: 256 << 20},
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: e.Repo.ID, container.LabelBranch: branch,
			container.LabelRole: container.RoleProxy, container.LabelVersion: version.Version,
		},
		Mounts: []container.Mount{
			{Source: p.volumes.Config, Target: loadConfigDir, Volume: true, NoCopy: true, Why: "where the proxy's configuration is loaded"},
			{Source: p.volumes.Log, Target: loadLogDir, Volume: true, NoCopy: true, Why: "the decision log, opened to the proxy's user"},
		},
		OpenStdin: true,
		StdinOnce: true,
	}
	load.Harden()
	return load
}

// loadProxyVolumes makes the proxy's volumes (once) and loads the
// configuration just written into the first, through the stdin of a
// short-lived container of the proxy's own image.
func (e *Env) loadProxyVolumes(ctx context.Context, d Engine, branch string, p *EgressPlan, u Undo) error {
	cctx := context.WithoutCancel(ctx)
	labels := e.networkLabels(branch)
	for _, v := range []string{p.volumes.Config, p.volumes.Log} {
		if _, err := d.CreateVolume(ctx, container.VolumeSpec{Name: v, Labels: labels}); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
		u.Add(func() { _ = d.RemoveVolume(cctx, v) })
	}
	load := e.proxyLoadSpec(branch, p)
	_ = d.Remove(cctx, load.Name)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeConfigTar(pw, p.configDir)) }()
	defer pr.Close()
	var out limitedBuffer
	res, err := container.Run(ctx, d, load, container.RunOptions{Streams: container.Streams{Stdin: pr, Stdout: &out, Stderr: &out}})
	if err != nil {
		return fmt.Errorf("egress proxy: load: %w", err)
	}
	if res.Err != nil || res.Code != 0 {
		return fmt.Errorf("egress proxy: loading its configuration onto the engine failed (exit %d): %v %s", res.Code, res.Err, out.String())
	}
	return nil
}

// writeConfigTar writes the regular files of the proxy's configuration
// directory as a tar, each under its own name (what __proxy-load takes).
func writeConfigTar(w io.Writer, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, ent := range entries {
		if !ent.Type().IsRegular() || !egress.LoadableName(ent.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: ent.Name(), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// limitedBuffer keeps the first max bytes written to it (4 KiB when 0: a
// failed load's message).
type limitedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := l.max
	if limit == 0 {
		limit = 4096
	}
	if room := limit - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes is what it kept.
func (l *limitedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.b)
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strconv.Quote(string(l.b))
}
