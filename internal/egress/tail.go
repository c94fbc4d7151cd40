package egress

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// TailLog writes what the log at path holds from byte from on, at most max
// bytes of whole lines: first a line "OFFSET n", n being where the next
// look starts, then the records. A log rotated since (shorter than from)
// gives the rest of its older generation first, then the new one from its
// start. A copy-mode proxy's supervisor reads its log so, through the
// proxy's container (its log is a volume on the engine).
func TailLog(w io.Writer, path string, from, max int64) error {
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	var older []byte
	if from > size {
		older = wholeLines(PreviousGeneration(path), from, max)
		from, max = 0, max-int64(len(older))
	}
	cur := wholeLines(path, from, max)
	if _, err := fmt.Fprintf(w, "OFFSET %d\n", from+int64(len(cur))); err != nil {
		return err
	}
	if _, err := w.Write(older); err != nil {
		return err
	}
	_, err := w.Write(cur)
	return err
}

// wholeLines reads path from byte from, at most max bytes, up to the last
// whole line; nothing when it cannot.
func wholeLines(path string, from, max int64) []byte {
	if max <= 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, from, max), max))
	if err != nil {
		return nil
	}
	return b[:bytes.LastIndexByte(b, '\n')+1]
}
