package proxyimage

import (
	"debug/elf"
	"errors"
	"io"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// ErrNotStatic is in the chain of CheckStatic's refusals (and Self's and
// Inspect's, which return the binary with it): a binary that cannot be
// the proxy, though a plan may still name its image.
var ErrNotStatic = errors.New("git-sandbox cannot run alone in the proxy's image")

// CheckStatic refuses a binary that cannot run alone in the proxy's image:
// one that is not a Linux program, or one linked against shared libraries
// (a program interpreter, or libraries it needs), such as a plain go build
// or go install with cgo on. A static PIE (a dynamic section naming no
// library and no interpreter) runs alone and passes. name is how the
// binary is named in the message.
func CheckStatic(r io.ReaderAt, name string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return usererr.Wrap(errors.Join(ErrNotStatic, err), "git-sandbox (%s) is not a Linux program: the egress proxy runs it in a Linux container", name).
			Hint("use a Linux build of git sandbox for allowlist networking (make build)").
			Hint("or start with --network none (no network) or --network open (no proxy)")
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return usererr.Wrap(ErrNotStatic, "git-sandbox (%s) is not a Linux program (ELF OS/ABI %v): the egress proxy runs it in a Linux container", name, f.OSABI).
			Hint("use a Linux build of git sandbox for allowlist networking (make build)")
	}
	var needs []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			needs = append(needs, "a program interpreter")
			break
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return usererr.Wrap(err, "git-sandbox (%s): cannot read its ELF dynamic section: %v", name, err)
	}
	if len(libs) > 0 {
		needs = append(needs, "shared libraries ("+strings.Join(libs, ", ")+")")
	}
	if len(needs) == 0 {
		return nil
	}
	return usererr.Wrap(ErrNotStatic, "git-sandbox (%s) is dynamically linked: it needs %s, and the egress proxy runs it alone in an image that has nothing but it", name, strings.Join(needs, " and ")).
		Hint("make build builds a static one (CGO_ENABLED=0); with go install: CGO_ENABLED=0 go install github.com/git-sandbox/git-sandbox/cmd/git-sandbox@VERSION").
		Hint("or start with --network none (no network) or --network open (no proxy)")
}
