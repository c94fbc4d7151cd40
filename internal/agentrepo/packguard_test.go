package agentrepo

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// guardAll runs a pack through a guard and returns what the guard passed
// on and its verdict.
func guardAll(pack []byte, b Budget) ([]byte, error) {
	g := GuardPack(bytes.NewReader(pack), b, "the agent's commits")
	out, _ := io.ReadAll(g)
	g.Close()
	return out, g.Err()
}

func randomText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// rawEntry is one pack entry: its header, a REF_DELTA's base, and its data
// compressed.
func rawEntry(typ int, size uint64, base []byte, data []byte) []byte {
	var e []byte
	c := byte(typ<<4) | byte(size&0x0f)
	size >>= 4
	for size > 0 {
		e = append(e, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	e = append(e, c)
	e = append(e, base...)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write(data)
	_ = w.Close()
	return append(e, z.Bytes()...)
}

// rawPack puts entries together into a pack (the trailer is its checksum,
// as git writes it).
func rawPack(entries ...[]byte) []byte {
	p := []byte("PACK")
	p = binary.BigEndian.AppendUint32(p, 2)
	p = binary.BigEndian.AppendUint32(p, uint32(len(entries)))
	for _, e := range entries {
		p = append(p, e...)
	}
	sum := sha1.Sum(p)
	return append(p, sum[:]...)
}

// deltaBomb is a pack of a 1 KiB blob and a delta on it whose result is
// size bytes: the base copied over and over, a few bytes per gigabyte.
func deltaBomb(size uint64) []byte {
	base := bytes.Repeat([]byte("a"), 1024)
	id := sha1.Sum(append([]byte("blob 1024\x00"), base...))
	var d []byte
	d = binary.AppendUvarint(d, 1024)
	d = binary.AppendUvarint(d, size)
	for left := size; left > 0; left -= min(left, 1024) {
		// copy 1024 bytes from offset 0: size byte 1 (0x00 0x04 = 1024).
		d = append(d, 0x80|0x20, 0x04)
	}
	return rawPack(rawEntry(objBlob, 1024, nil, base), rawEntry(objRefDelta, uint64(len(d)), id[:], d))
}

// indexPack runs git index-pack on pack in a new repository.
func indexPack(t *testing.T, pack []byte) error {
	t.Helper()
	_, err := indexPackIn(t, pack)
	return err
}

// indexPackIn is indexPack that also returns the repository.
func indexPackIn(t *testing.T, pack []byte) (string, error) {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, nil, "init", "-q", "--bare", ".")
	cmd := exec.Command("git", "index-pack", "--stdin", "--strict")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+dir)
	cmd.Stdin = bytes.NewReader(pack)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return dir, fmt.Errorf("%v: %s", err, out)
	}
	return dir, nil
}

// TestGuardPassesAnHonestPack: a pack git made (commits' trees and blobs,
// deltas among similar files) passes whole, and index-pack takes it.
func TestGuardPassesAnHonestPack(t *testing.T) {
	common := randomText(200 << 10)
	entries := map[string]string{"a.txt": common + "a", "b.txt": common + "b", "c.txt": common + "c", "small": "x\n", "empty": ""}
	_, pack := packOf(t, entries, nil)
	for _, b := range []Budget{DefaultBudget, {}, {MaxObject: 300 << 10, MaxTotal: 1 << 20}} {
		out, err := guardAll(pack, b)
		if err != nil {
			t.Fatalf("budget %+v: %v", b, err)
		}
		if !bytes.Equal(out, pack) {
			t.Fatalf("budget %+v: passed on %d bytes of %d, or changed them", b, len(out), len(pack))
		}
	}
	dir, err := indexPackIn(t, pack)
	if err != nil {
		t.Fatal(err)
	}
	// The pack holds deltas (the three similar files), so the guard read
	// their headers too.
	idx, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.idx"))
	if len(idx) != 1 {
		t.Fatalf("packs indexed: %q", idx)
	}
	cmd := exec.Command("git", "verify-pack", "-s", idx[0])
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "chain length = 1") {
		t.Errorf("the pack holds no deltas (%v):\n%s", err, out)
	}
}

// TestGuardCutsThePack: what breaks the budget never reaches index-pack:
// the stream is cut before the entry that declares it (or before the
// bytes past the total), with a message naming the setting.
func TestGuardCutsThePack(t *testing.T) {
	_, bigRandom := packOf(t, map[string]string{"big": randomText(3 << 20)}, nil)
	_, zeros := packOf(t, map[string]string{"zeros": strings.Repeat("\x00", 64<<20)}, nil)
	many := map[string]string{}
	for i := range 6 {
		many[fmt.Sprint("f", i)] = randomText(600 << 10)
	}
	_, manyPack := packOf(t, many, nil)
	bomb := deltaBomb(1 << 30)
	var empties [][]byte
	for range 10000 {
		empties = append(empties, rawEntry(objBlob, 0, nil, nil))
	}
	emptyPack := rawPack(empties...)
	budget := Budget{MaxObject: 1 << 20, MaxTotal: 64 << 20, ObjectSetting: "budget.sync_object", TotalSetting: "budget.sync"}
	tests := []struct {
		name    string
		pack    []byte
		budget  Budget
		setting string
		says    string
		passed  int // at most this many bytes reach index-pack
	}{
		{"a file over sync_object", bigRandom, budget, "budget.sync_object", "a file in the agent's commits is 3MiB, over the 1MiB allowed", 4 << 10},
		{"64 MiB of zeros in a few KiB", zeros, budget, "budget.sync_object", "a file in the agent's commits is 64MiB", 4 << 10},
		{"a delta that copies its base a million times", bomb, budget, "budget.sync_object", "an object made from a delta in the agent's commits is 1GiB", 4 << 10},
		{"more than the total", manyPack, Budget{MaxTotal: 1 << 20, TotalSetting: "budget.sync"}, "budget.sync",
			"the agent's commits hold more than 1MiB of new objects, over the budget of one sync", int(1<<20 + packOverhead(1<<20))},
		{"bytes beyond the total and the pack's overhead", emptyPack, Budget{MaxTotal: 1024, TotalSetting: "budget.sync"}, "budget.sync",
			"the agent's commits hold more than 1KiB of new objects", int(1024 + packOverhead(1024))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := guardAll(tc.pack, tc.budget)
			setting, ok := IsBudget(err)
			if !ok || setting != tc.setting || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v (budget %v, setting %q), want one saying %q for %s", err, ok, setting, tc.says, tc.setting)
			}
			if len(out) > tc.passed || len(out) >= len(tc.pack) {
				t.Errorf("passed on %d bytes of the %d-byte pack, want at most %d", len(out), len(tc.pack), tc.passed)
			}
			if indexPack(t, out) == nil {
				t.Error("index-pack took the cut pack")
			}
		})
	}
}

// TestGuardRefusesWhatIsNotAPack: a stream that is not a pack, or an entry
// whose data is longer than its header says, is cut (not a budget).
func TestGuardRefusesWhatIsNotAPack(t *testing.T) {
	long := rawPack(rawEntry(objBlob, 4, nil, []byte("more than four bytes")))
	short := rawPack(rawEntry(objBlob, 100, nil, []byte("less")))
	for name, pack := range map[string][]byte{
		"not a pack": []byte("GIT and then some"),
		"longer":     long,
		"shorter":    short,
		"cut short":  long[:14],
		"a type 5":   rawPack(rawEntry(5, 1, nil, []byte("x"))),
	} {
		_, err := guardAll(pack, DefaultBudget)
		if err == nil {
			t.Errorf("%s: passed", name)
		} else if _, ok := IsBudget(err); ok {
			t.Errorf("%s: a budget refusal: %v", name, err)
		}
	}
}
