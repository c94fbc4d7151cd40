package proxyimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/version"
)

// User is the image's user. Every container of it names its own user (the
// proxy runs as the invoking user), so this is only what a stray run of
// the image would get: nobody.
const User = "65534:65534"

// WriteArchive writes the proxy image of b to w as `docker save` writes an
// image (manifest.json, the image's configuration, one layer), which an
// engine loads without a registry. The layer holds the binary at Path and
// nothing else; the configuration names an entrypoint (Path), a user, no
// environment and no healthcheck. Every byte is fixed by the binary (no
// time stamps), so the image's id is the same on every engine and two
// loads at once make one image.
func WriteArchive(w io.Writer, b Binary) error {
	// First pass: the layer's digest, and the binary checked to be the
	// one the tag names.
	h := sha256.New()
	n, err := writeLayer(h, b)
	if err != nil {
		return err
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	cfg, err := imageConfig(b, diffID)
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := diffID[len("sha256:"):] + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": cfgName, "RepoTags": []string{b.Tag()}, "Layers": []string{layerName},
	}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(header(layerName, n, 0o644)); err != nil {
		return err
	}
	if _, err := writeLayer(tw, b); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(header(f.name, int64(len(f.data)), 0o644)); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// header is a regular file's tar header without time stamps or owners.
func header(name string, size, mode int64) *tar.Header {
	return &tar.Header{
		Name: name, Size: size, Mode: mode, Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR,
	}
}

// writeLayer writes the image's one layer, a tar of the binary at Path,
// and returns its length. The binary must still have b's content.
func writeLayer(w io.Writer, b Binary) (int64, error) {
	f, err := os.Open(b.File)
	if err != nil {
		return 0, fmt.Errorf("proxy image: %w", err)
	}
	defer f.Close()
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	if err := tw.WriteHeader(header(Path[1:], b.Size, 0o755)); err != nil {
		return 0, err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, b.Size)); err != nil {
		return 0, fmt.Errorf("proxy image: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 {
		return 0, fmt.Errorf("proxy image: %s changed while git sandbox ran (sha256 %s, was %s)", b.File, got[:12], b.SHA256[:12])
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

// imageConfig is the image's configuration (the OCI image config, as
// Docker reads it).
func imageConfig(b Binary, diffID string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"User":       User,
			"Entrypoint": []string{Path},
			"WorkingDir": "/",
			"Labels": map[string]string{
				LabelProxy:   "1",
				LabelSHA256:  b.SHA256,
				LabelVersion: version.String(),
			},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]string{{"created_by": "git sandbox: its own binary, the egress proxy"}},
	})
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
