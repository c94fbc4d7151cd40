package agentrepo

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/docker/go-units"
)

// PackGuard checks a pack from an untrusted source (copy mode's helper on
// the engine) while it streams to git index-pack, and passes on only what
// it has checked, so that the stream is cut before the bytes that break
// the budget reach index-pack:
//
//   - the sizes its objects declare (a delta's result's, not the delta's)
//     add up to no more than the budget's total, as sync counts them, and
//     its bytes to no more than that and the pack's own overhead;
//   - no entry declares an object larger than the budget allows (a file over
//     MaxObject, a commit or tree over the fixed caps sync applies), nor a
//     delta whose result would be: index-pack inflates an object as it
//     reads it, and holds a delta's result whole in memory, so a gigabyte
//     of zeros (a megabyte of pack) or a delta that copies one base a
//     thousand times would cost the host before sync's checks ran.
//
// Each entry is inflated once here to find where it ends (the pack format
// has no lengths), never past the size it declares. index-pack still checks
// everything (ids, checksums, fsck); the guard bounds what that costs.
type PackGuard struct {
	pr  *io.PipeReader
	mu  sync.Mutex
	err error
}

// packOverhead is what a pack's bytes may add to its objects' sizes:
// entry headers, zlib's framing of data that does not compress, the
// pack's header and trailer. Compression makes honest packs smaller.
func packOverhead(total int64) int64 { return total/16 + 64<<10 }

// GuardPack starts checking src against b; what names the pack's content
// in messages ("the agent's commits"). Read the checked stream from the
// guard, and Close it when done. The check ends when src does: a reader
// that stops early closes src too.
func GuardPack(src io.Reader, b Budget, what string) *PackGuard {
	pr, pw := io.Pipe()
	g := &PackGuard{pr: pr}
	go func() {
		t := &tee{r: bufio.NewReaderSize(src, 64<<10), w: pw, left: -1}
		if b.MaxTotal > 0 {
			t.left = b.MaxTotal + packOverhead(b.MaxTotal)
		}
		c := packCheck{r: t, b: b, what: what}
		err := c.pack()
		var be *budgetError
		if t.over {
			err = c.overTotal()
		} else if errors.As(err, &be) {
			err = be // without the entry's number
		}
		// Recorded before the reader sees the stream end, so that
		// whoever reads it to its end finds why it ended.
		g.mu.Lock()
		g.err = err
		g.mu.Unlock()
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.Close()
	}()
	return g
}

// Read reads the checked stream.
func (g *PackGuard) Read(p []byte) (int, error) { return g.pr.Read(p) }

// Close ends the stream for the guard: what it still passes on fails.
func (g *PackGuard) Close() { g.pr.CloseWithError(errors.New("pack reader closed")) }

// Err says why the stream was cut: a budget (IsBudget reports it), a pack
// that is not one, or the source's error; nil when it passed whole or the
// check is still going (its reader stopped early on its own).
func (g *PackGuard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// IsBudget reports whether err is a refusal for a budget, and names the
// setting that would let it through ("" for a fixed cap).
func IsBudget(err error) (string, bool) {
	var be *budgetError
	if errors.As(err, &be) {
		return be.setting, true
	}
	return "", false
}

// tee reads the pack for the check and keeps what was read; flush passes
// it on. Held bytes are flushed every 32 KiB unless hold is set (a
// delta's header is being read), and never beyond left bytes in all
// (left < 0: no bound).
type tee struct {
	r    *bufio.Reader
	w    *io.PipeWriter
	held []byte
	hold bool
	left int64
	over bool
}

const (
	teeChunk = 32 << 10
	// maxHeld bounds what a delta's header may take to arrive: deflate
	// can put empty blocks before any data.
	maxHeld = 1 << 20
)

func (t *tee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.held = append(t.held, p[:n]...)
	if ferr := t.maybeFlush(); ferr != nil {
		return n, ferr
	}
	return n, err
}

// ReadByte makes tee an io.ByteReader, so that zlib reads no further than
// an entry's end.
func (t *tee) ReadByte() (byte, error) {
	b, err := t.r.ReadByte()
	if err != nil {
		return 0, err
	}
	t.held = append(t.held, b)
	if len(t.held) >= teeChunk {
		return b, t.maybeFlush()
	}
	return b, nil
}

func (t *tee) maybeFlush() error {
	switch {
	case t.hold && len(t.held) > maxHeld:
		return errors.New("a delta's header does not come in its first MiB")
	case t.hold || len(t.held) < teeChunk:
		return nil
	}
	return t.flush()
}

func (t *tee) flush() error {
	if len(t.held) == 0 {
		return nil
	}
	if t.left >= 0 && int64(len(t.held)) > t.left {
		t.over = true
		return errors.New("pack over budget")
	}
	if _, err := t.w.Write(t.held); err != nil {
		return err
	}
	if t.left >= 0 {
		t.left -= int64(len(t.held))
	}
	t.held = t.held[:0]
	return nil
}

// packCheck reads a pack entry by entry.
type packCheck struct {
	r     *tee
	b     Budget
	what  string
	total int64 // the objects' sizes so far (a delta's result size)
	zr    io.ReadCloser
}

func (c *packCheck) overTotal() error {
	return &budgetError{fmt.Sprintf("%s hold more than %s of new objects, over the budget of one sync", c.what, units.BytesSize(float64(c.b.MaxTotal))), c.b.TotalSetting}
}

// pack checks the header, every entry and the trailer, and that nothing
// follows.
func (c *packCheck) pack() error {
	var hdr [12]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fmt.Errorf("pack header: %w", err)
	}
	if string(hdr[:4]) != "PACK" || (binary.BigEndian.Uint32(hdr[4:8]) != 2 && binary.BigEndian.Uint32(hdr[4:8]) != 3) {
		return errors.New("not a pack of version 2 or 3")
	}
	n := binary.BigEndian.Uint32(hdr[8:])
	if n > maxObjects {
		return fmt.Errorf("a pack of %d objects, more than %d", n, maxObjects)
	}
	for i := uint32(0); i < n; i++ {
		if err := c.entry(); err != nil {
			return fmt.Errorf("pack entry %d: %w", i, err)
		}
	}
	// The trailer is passed on as it is: index-pack checks it. Whatever
	// follows it is not read.
	var trailer [20]byte
	if _, err := io.ReadFull(c.r, trailer[:]); err != nil {
		return fmt.Errorf("pack trailer: %w", err)
	}
	return c.r.flush()
}

// Object types in a pack entry's header.
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

// entry checks one entry: its declared size, a delta's result size, and
// that its data inflates to no more than it declared.
func (c *packCheck) entry() error {
	// What was read before this entry was checked: pass it on.
	if err := c.r.flush(); err != nil {
		return err
	}
	c.r.hold = true
	typ, size, err := c.entryHeader()
	if err != nil {
		return err
	}
	if err := c.within(typ, size); err != nil {
		return err
	}
	delta := typ == objOfsDelta || typ == objRefDelta
	c.r.hold = delta
	if c.zr == nil {
		c.zr, err = zlib.NewReader(c.r)
	} else {
		err = c.zr.(zlib.Resetter).Reset(c.r, nil)
	}
	if err != nil {
		return err
	}
	data := io.LimitReader(c.zr, int64(size))
	var read int64
	if delta {
		// The delta's data starts with its base's size and its result's.
		br := &countingByteReader{r: data}
		if _, err := binary.ReadUvarint(br); err != nil {
			return fmt.Errorf("delta header: %w", err)
		}
		result, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("delta header: %w", err)
		}
		if err := c.within(deltaResult, result); err != nil {
			return err
		}
		read = br.n
		c.r.hold = false
	}
	n, err := io.Copy(io.Discard, data)
	if err != nil {
		return err
	}
	if read+n != int64(size) {
		return fmt.Errorf("%d bytes of data where the header says %d", read+n, size)
	}
	// The stream must end here (its checksum is read and checked then).
	var one [1]byte
	if k, err := c.zr.Read(one[:]); k != 0 || err != io.EOF {
		return fmt.Errorf("more data than the header's %d bytes", size)
	}
	return nil
}

// entryHeader reads an entry's type and size, and a delta's base.
func (c *packCheck) entryHeader() (int, uint64, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ := int(b>>4) & 7
	size := uint64(b & 0x0f)
	for shift := 4; b&0x80 != 0; shift += 7 {
		if shift > 57 {
			return 0, 0, errors.New("object size out of range")
		}
		if b, err = c.r.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= uint64(b&0x7f) << shift
	}
	switch typ {
	case objCommit, objTree, objBlob, objTag:
	case objOfsDelta:
		for i := 0; ; i++ {
			if b, err = c.r.ReadByte(); err != nil {
				return 0, 0, err
			}
			if b&0x80 == 0 {
				break
			}
			if i > 8 {
				return 0, 0, errors.New("delta base offset out of range")
			}
		}
	case objRefDelta:
		var base [20]byte
		if _, err := io.ReadFull(c.r, base[:]); err != nil {
			return 0, 0, err
		}
	default:
		return 0, 0, fmt.Errorf("object type %d", typ)
	}
	return typ, size, nil
}

// deltaResult is the kind of a delta's result for within: a blob, tree,
// commit or tag, not known before the delta is applied.
const deltaResult = -1

// within checks one object's size against the largest its kind may be,
// and adds what it will cost to the total. A delta's data is bounded as
// its result is (the larger of a file's and a tree's cap), and only its
// result counts.
func (c *packCheck) within(kind int, size uint64) error {
	limit, what, setting := c.b.MaxObject, "a file", c.b.ObjectSetting
	switch kind {
	case objCommit, objTag:
		limit, what, setting = maxCommitSize, "a commit", ""
	case objTree:
		limit, what, setting = maxTreeSize, "a tree", ""
	case objOfsDelta, objRefDelta, deltaResult:
		limit, what = max(c.b.MaxObject, maxTreeSize), "an object made from a delta"
		if kind != deltaResult {
			what = "a delta"
		}
		if c.b.MaxObject <= 0 {
			limit = 0
		}
	}
	if limit > 0 && size > uint64(limit) {
		return &budgetError{fmt.Sprintf("%s in %s is %s, over the %s allowed", what, c.what, units.BytesSize(float64(size)), units.BytesSize(float64(limit))), setting}
	}
	if kind == objOfsDelta || kind == objRefDelta {
		return nil
	}
	c.total += int64(min(size, 1<<62))
	if c.b.MaxTotal > 0 && c.total > c.b.MaxTotal {
		return c.overTotal()
	}
	return nil
}

// countingByteReader reads bytes one at a time and counts them.
type countingByteReader struct {
	r io.Reader
	n int64
}

func (c *countingByteReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := io.ReadFull(c.r, b[:]); err != nil {
		return 0, err
	}
	c.n++
	return b[0], nil
}
