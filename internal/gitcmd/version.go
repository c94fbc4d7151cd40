package gitcmd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Version is the version of the git on PATH.
type Version struct {
	// Major and Minor are the first two numbers.
	Major, Minor int
	// Text is what git version printed ("git version 2.39.5").
	Text string
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// GitVersion runs git version. It needs no repository: the git runs with
// none and no configuration.
func GitVersion(ctx context.Context) (Version, error) {
	g := &Runner{GitDir: os.DevNull, Isolated: true}
	out, err := g.Output(ctx, "version")
	if err != nil {
		return Version{}, err
	}
	return ParseVersion(out)
}

// ParseVersion reads git version's output ("git version 2.39.5",
// "git version 2.45.1.windows.1").
func ParseVersion(s string) (Version, error) {
	v := Version{Text: strings.TrimSpace(s)}
	f := strings.Fields(v.Text)
	if len(f) < 3 || f[0] != "git" || f[1] != "version" {
		return v, fmt.Errorf("unexpected git version output %q", s)
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return v, fmt.Errorf("unexpected git version %q", f[2])
	}
	var err1, err2 error
	v.Major, err1 = strconv.Atoi(parts[0])
	v.Minor, err2 = strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return v, fmt.Errorf("unexpected git version %q", f[2])
	}
	return v, nil
}
