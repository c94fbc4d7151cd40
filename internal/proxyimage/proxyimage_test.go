package proxyimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// testELF is an ELF header with one program header of each given type
// (and, for PT_INTERP, the interpreter's path): enough for the check.
func testELF(types ...elf.ProgType) []byte {
	var b bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(types)),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	_ = binary.Write(&b, binary.LittleEndian, hdr)
	interp := "/lib64/ld-linux-x86-64.so.2\x00"
	off := uint64(64 + 56*len(types))
	for _, t := range types {
		p := elf.Prog64{Type: uint32(t)}
		if t == elf.PT_INTERP {
			p.Off, p.Filesz, p.Memsz = off, uint64(len(interp)), uint64(len(interp))
		}
		_ = binary.Write(&b, binary.LittleEndian, p)
	}
	b.WriteString(interp)
	return b.Bytes()
}

func TestCheckStatic(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" passes
	}{
		{"static", testELF(elf.PT_LOAD, elf.PT_NOTE), ""},
		{"static PIE (a dynamic segment, no interpreter)", testELF(elf.PT_LOAD, elf.PT_DYNAMIC), ""},
		{"dynamic", testELF(elf.PT_PHDR, elf.PT_INTERP, elf.PT_LOAD), "dynamically linked: it needs a program interpreter"},
		{"a script", []byte("#!/bin/sh\necho hi\n"), "not a Linux program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStatic(bytes.NewReader(tc.data), "git-sandbox")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ue, ok := usererr.As(err)
			if !ok || !strings.Contains(ue.Msg, tc.want) || len(ue.Hints) == 0 {
				t.Fatalf("CheckStatic = %v, want a user error saying %q with a hint", err, tc.want)
			}
		})
	}
}

// writeBinary writes a stand-in binary (a static ELF header and a tail).
func writeBinary(t *testing.T, dir, tail string) string {
	t.Helper()
	p := filepath.Join(dir, "git-sandbox")
	if err := os.WriteFile(p, append(testELF(elf.PT_LOAD), tail...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInspectHashesAndKeepsTheHash(t *testing.T) {
	dir := t.TempDir()
	bin := writeBinary(t, dir, "one")
	cache := filepath.Join(dir, "cache.json")
	b, err := Inspect(bin, cache)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(bin)
	sum := sha256.Sum256(data)
	if b.SHA256 != hex.EncodeToString(sum[:]) || b.Size != int64(len(data)) || b.File != bin {
		t.Fatalf("Inspect = %+v", b)
	}
	if !regexp.MustCompile(`^git-sandbox-proxy:[A-Za-z0-9_][A-Za-z0-9_.-]*-[0-9a-f]{12}$`).MatchString(b.Tag()) || !strings.HasSuffix(b.Tag(), b.SHA256[:12]) {
		t.Errorf("tag %q", b.Tag())
	}
	// The same file again: the hash comes from the cache (a planted
	// cache entry for this identity proves it was read).
	var c cacheEntry
	raw, err := os.ReadFile(cache)
	if err != nil || json.Unmarshal(raw, &c) != nil {
		t.Fatalf("cache %s: %v", raw, err)
	}
	c.Binary.SHA256 = strings.Repeat("a", 64)
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(cache, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if again, err := Inspect(bin, cache); err != nil || again.SHA256 != c.Binary.SHA256 {
		t.Errorf("second Inspect = %+v, %v: the cache was not used", again, err)
	}
	// A file written again (another binary, another size) is hashed afresh.
	bin = writeBinary(t, dir, "two, longer")
	b2, err := Inspect(bin, cache)
	if err != nil || b2.SHA256 == c.Binary.SHA256 || b2.SHA256 == b.SHA256 {
		t.Errorf("Inspect of a new binary = %+v, %v", b2, err)
	}
}

func TestInspectRefusesADynamicBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "git-sandbox")
	if err := os.WriteFile(bin, testELF(elf.PT_INTERP, elf.PT_LOAD), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache.json")
	if _, err := Inspect(bin, cache); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("Inspect = %v", err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("a refused binary was cached")
	}
}

// readArchive returns the files of an archive by name.
func readArchive(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

// The archive is what docker load takes: a manifest naming the tag, a
// configuration with the entrypoint and no environment or healthcheck,
// and one layer with the binary alone. The same binary makes the same
// bytes.
func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	b, err := Inspect(writeBinary(t, dir, "payload"), "")
	if err != nil {
		t.Fatal(err)
	}
	var one, two bytes.Buffer
	if err := WriteArchive(&one, b); err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(&two, b); err != nil || !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Fatalf("two archives of one binary differ (%v)", err)
	}
	files := readArchive(t, one.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 ||
		len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != b.Tag() || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest %s: %v", files["manifest.json"], err)
	}
	var cfg struct {
		OS     string
		Config map[string]json.RawMessage
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(files[manifest[0].Config], &cfg); err != nil {
		t.Fatal(err)
	}
	if string(cfg.Config["Entrypoint"]) != `["/git-sandbox"]` || cfg.Config["Env"] != nil || cfg.Config["Healthcheck"] != nil || cfg.OS != "linux" {
		t.Errorf("image configuration %s", files[manifest[0].Config])
	}
	layer := files[manifest[0].Layers[0]]
	sum := sha256.Sum256(layer)
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("diff ids %v, layer sha256 %x", cfg.RootFS.DiffIDs, sum)
	}
	inLayer := readArchive(t, layer)
	want, _ := os.ReadFile(b.File)
	if len(inLayer) != 1 || !bytes.Equal(inLayer["git-sandbox"], want) {
		t.Errorf("layer holds %d files; the binary matches: %v", len(inLayer), bytes.Equal(inLayer["git-sandbox"], want))
	}

	// A binary that is no longer the one hashed is not archived.
	if err := os.WriteFile(b.File, append(want, 'x'), 0o755); err != nil {
		t.Fatal(err)
	}
	b.Size++
	if err := WriteArchive(io.Discard, b); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("archive of a changed binary: %v", err)
	}
}

func TestTagVersion(t *testing.T) {
	for in, want := range map[string]string{"dev": "dev", "v1.2.3-4-gabc+dirty": "v1.2.3-4-gabc_dirty", "": "v", ".x": "v.x"} {
		if got := tagVersion(in); got != want {
			t.Errorf("tagVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
