package sandbox

// Copy mode's egress proxy: on an engine that cannot see this machine's
// files, the proxy (git-sandbox itself, and its configuration) is loaded
// into a volume before each start, and its decision log is a volume too.

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// proxyVolumes are a copy-mode proxy's two volumes.
type proxyVolumes struct {
	// Bin holds the binary and its configuration (read-only to the
	// proxy); Log its decision log.
	Bin, Log string
}

// proxyOnVolumes replaces the proxy's host mounts with volumes.
func proxyOnVolumes(p *EgressPlan) error {
	v := &proxyVolumes{Bin: p.Proxy.Name + "-bin", Log: p.Proxy.Name + "-log"}
	spec := *p.Proxy
	spec.Mounts = []container.Mount{
		{Source: v.Bin, Target: path.Dir(proxyBinary), ReadOnly: true, Volume: true, NoCopy: true, Why: "git-sandbox itself, which serves as the proxy, loaded at its start"},
		{Source: v.Bin, Target: proxyConfigDir, ReadOnly: true, Volume: true, NoCopy: true, Why: "the proxy's configuration (allow list), loaded at its start"},
		{Source: v.Log, Target: proxyLogDir, Volume: true, NoCopy: true, Why: "the decision log, on the engine"},
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	p.Proxy, p.volumes = &spec, v
	return nil
}

// loadProxyVolumes makes the proxy's volumes (once) and loads this
// binary and the configuration just written into the first, through the
// stdin of a short-lived container of the proxy's image (as root, no
// capabilities: the owner of the volumes' roots, which it opens to the
// proxy's user for the log).
func (e *Env) loadProxyVolumes(ctx context.Context, d Engine, branch string, p *EgressPlan, u *undo) error {
	cctx := context.WithoutCancel(ctx)
	labels := e.networkLabels(branch)
	for _, v := range []string{p.volumes.Bin, p.volumes.Log} {
		if _, err := d.CreateVolume(ctx, container.VolumeSpec{Name: v, Labels: labels}); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
		u.add(func() { _ = d.RemoveVolume(cctx, v) })
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	load := &container.Spec{
		Name:    p.Proxy.Name + "-load",
		Image:   p.Proxy.Image,
		User:    "0:0",
		WorkDir: "/",
		Network: container.NetworkNone,
		Runtime: p.Proxy.Runtime,
		Limits:  container.Limits{Pids: 64, MemoryBytes: 256 << 20},
		Argv:    []string{"/bin/sh", "-c", "tar -x -f - -C /load && chmod 0755 /load && chmod 0777 /log"},
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelRepo: e.Repo.ID, container.LabelBranch: branch,
			container.LabelRole: container.RoleProxy, container.LabelVersion: version.Version,
		},
		Mounts: []container.Mount{
			{Source: p.volumes.Bin, Target: "/load", Volume: true, NoCopy: true, Why: "where the proxy is loaded"},
			{Source: p.volumes.Log, Target: "/log", Volume: true, NoCopy: true, Why: "the decision log, opened to the proxy's user"},
		},
		OpenStdin: true,
		StdinOnce: true,
	}
	load.Harden()
	_ = d.Remove(cctx, load.Name)
	id, err := d.Create(ctx, load)
	if err != nil {
		return fmt.Errorf("egress proxy: load: %w", err)
	}
	defer d.Remove(cctx, id)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeProxyTar(pw, exe, filepath.Join(p.configDir, proxyConfigFile))) }()
	defer pr.Close()
	waitC := d.WaitExit(ctx, id, container.WaitNextExit)
	wait, err := d.Attach(ctx, id, container.Streams{Stdin: pr, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		return fmt.Errorf("egress proxy: load: %w", err)
	}
	if err := d.Start(ctx, id); err != nil {
		return fmt.Errorf("egress proxy: load: %w", err)
	}
	_ = wait()
	res := <-waitC
	if res.Err != nil || res.Code != 0 {
		return fmt.Errorf("egress proxy: loading it onto the engine failed (exit %d): %v", res.Code, res.Err)
	}
	return nil
}

// writeProxyTar writes the binary and the configuration as a tar.
func writeProxyTar(w io.Writer, exe, config string) error {
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		src, name string
		mode      int64
	}{{exe, path.Base(proxyBinary), 0o755}, {config, proxyConfigFile, 0o644}} {
		fh, err := os.Open(f.src)
		if err != nil {
			return err
		}
		fi, err := fh.Stat()
		if err != nil {
			fh.Close()
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			fh.Close()
			return err
		}
		_, err = io.Copy(tw, fh)
		fh.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}
