package gitcmd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// EachBlob streams the blobs ids names through one git cat-file --batch and
// calls fn for each, in order, with its size and a reader of exactly its
// content. fn may read as much or as little as it wants: the rest is
// skipped, so a huge blob costs no memory. An id that is not a blob, or an
// error from fn, stops the stream.
func (r *Runner) EachBlob(ctx context.Context, ids []string, fn func(i int, size int64, content io.Reader) error) (err error) {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := r.Command(ctx, "cat-file", "--batch")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git cat-file: %w", err)
	}
	go func() {
		bw := bufio.NewWriter(stdin)
		for _, id := range ids {
			if _, err := fmt.Fprintln(bw, id); err != nil {
				break
			}
		}
		_ = bw.Flush()
		_ = stdin.Close()
	}()
	defer func() {
		if err != nil {
			cancel()
		}
		_, _ = io.Copy(io.Discard, stdout)
		if werr := cmd.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("git cat-file: %v: %s", werr, strings.TrimSpace(stderr.String()))
		}
	}()
	br := bufio.NewReaderSize(stdout, 64<<10)
	for i, id := range ids {
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("git cat-file: %w", err)
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != id || fields[1] != "blob" {
			return fmt.Errorf("git cat-file: %s: unexpected answer %q", id, strings.TrimSpace(line))
		}
		size, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return fmt.Errorf("git cat-file: %s: size %q", id, fields[2])
		}
		content := &io.LimitedReader{R: br, N: size}
		if err := fn(i, size, content); err != nil {
			return err
		}
		// What fn left unread, and the newline after the content.
		if _, err := io.CopyN(io.Discard, br, content.N+1); err != nil {
			return fmt.Errorf("git cat-file: %w", err)
		}
	}
	return nil
}

// ObjectSizes returns the size of each object ids names, from the
// object headers (nothing is read whole), through one git cat-file
// --batch-check.
func (r *Runner) ObjectSizes(ctx context.Context, ids []string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := r.Run(ctx, strings.NewReader(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch-check=%(objectsize)")
	if err != nil {
		return nil, err
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(ids) {
		return nil, fmt.Errorf("git cat-file: %d sizes for %d objects", len(lines), len(ids))
	}
	sizes := make([]int64, len(lines))
	for i, l := range lines {
		if sizes[i], err = strconv.ParseInt(l, 10, 64); err != nil {
			return nil, fmt.Errorf("git cat-file: %s: size %q", ids[i], l)
		}
	}
	return sizes, nil
}
