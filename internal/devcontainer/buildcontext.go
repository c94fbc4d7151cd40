package devcontainer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// contextDockerfile is where the repository's Dockerfile is put in the
// build context, whatever its path: it may lie outside the context
// directory, and .dockerignore may exclude it.
const contextDockerfile = ".git-sandbox.Dockerfile"

// contextFile is one file of a build context.
type contextFile struct {
	Mode string
	ID   string
	Path string
}

// contextFiles lists the files of the context tree that the build sees:
// every blob, less what the context's .dockerignore excludes (Docker's own
// matcher, so the rules are Docker's). Submodules are not part of the tree's
// content and are left out, as git archive leaves them empty.
func (t *tree) contextFiles(ctx context.Context, b *Build) ([]contextFile, error) {
	var patterns []string
	_, e, err := t.resolve(ctx, path.Join(b.Context, ".dockerignore"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%s/.dockerignore %w", b.Context, err)
	case e.Type == "blob":
		data, err := t.blob(ctx, e.ID, maxFileSize)
		if err != nil {
			return nil, fmt.Errorf("%s/.dockerignore: %w", b.Context, err)
		}
		if patterns, err = ignorefile.ReadAll(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s/.dockerignore: %w", b.Context, err)
		}
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf("%s/.dockerignore: %w", b.Context, err)
	}
	out, err := t.g.Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", b.ContextTree)
	if err != nil {
		return nil, err
	}
	var files []contextFile
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		e, name, ok := parseTreeLine(string(rec))
		if !ok {
			return nil, fmt.Errorf("ls-tree: unexpected line %q", rec)
		}
		if e.Type != "blob" {
			continue
		}
		if name == contextDockerfile {
			return nil, fmt.Errorf("the build context holds %s, a name git sandbox uses for the Dockerfile", contextDockerfile)
		}
		if len(patterns) > 0 {
			excluded, err := pm.MatchesOrParentMatches(name)
			if err != nil {
				return nil, fmt.Errorf("%s/.dockerignore: %w", b.Context, err)
			}
			if excluded {
				continue
			}
		}
		files = append(files, contextFile{Mode: e.Mode, ID: e.ID, Path: name})
	}
	return files, nil
}

// contextDigest is a content hash of a build context: every file's path,
// mode and blob id (itself a hash of the content), in git's order.
func contextDigest(files []contextFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s %s %s\x00", f.Mode, f.ID, f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeContext writes the build context as a tar stream: the files, read
// from the object store by one git cat-file --batch, with fixed owners and
// times (so equal inputs give equal streams), and the Dockerfile under
// contextDockerfile.
func (t *tree) writeContext(ctx context.Context, w io.Writer, files []contextFile, dockerfile []byte) (err error) {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	if len(files) > 0 {
		if err := t.writeFiles(ctx, tw, files, epoch); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: contextDockerfile, Mode: 0o644, Size: int64(len(dockerfile)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return err
	}
	return tw.Close()
}

func (t *tree) writeFiles(ctx context.Context, tw *tar.Writer, files []contextFile, epoch time.Time) error {
	ids := make([]string, len(files))
	for i, f := range files {
		ids[i] = f.ID
	}
	return t.g.EachBlob(ctx, ids, func(i int, size int64, content io.Reader) error {
		f := files[i]
		h := &tar.Header{Name: f.Path, ModTime: epoch, Format: tar.FormatPAX}
		if f.Mode == modeSymlink {
			if size > maxLinkSize {
				return fmt.Errorf("%s: a symbolic link of %d bytes", f.Path, size)
			}
			target, err := io.ReadAll(content)
			if err != nil {
				return fmt.Errorf("git cat-file: %w", err)
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, string(target), 0o777
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, size, 0o644
		if f.Mode == modeExecutable {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, content, size); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		return nil
	})
}
