package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// rawTerminalBytes are what the agent's names below hold that a terminal
// acts on: ESC and BEL (CSI and OSC sequences), the C1 CSI, DEL and the
// right-to-left override.
var rawTerminalBytes = []string{"\x1b", "\x07", "\u009b", "\x7f", "\u202e"}

// noRawTerminalBytes fails when out holds any of rawTerminalBytes.
func noRawTerminalBytes(t *testing.T, what, out string) {
	t.Helper()
	for _, b := range rawTerminalBytes {
		if strings.Contains(out, b) {
			t.Errorf("%s printed %q raw:\n%q", what, b, out)
		}
	}
}

// jsonAgent names a file with a right-to-left override, CSI and OSC
// sequences, a C1 control and DEL ($1 its content), leaves an untracked
// file too large for snapshots under the same name, and asks its proxy for
// a host whose name carries a right-to-left override and a C1 control
// (percent-encoded in the URL, which Go's URL parser decodes in a host).
const jsonAgent = `n=$(printf 'x\342\200\256txt.exe\033[2J\033]0;pwned\007\302\23331m\177')
printf "$1" > "$n"
head -c 4096 /dev/zero > "$n.big"
p=${http_proxy#http://}
exec 3<>/dev/tcp/${p%:*}/${p##*:}
printf 'GET http://x%%E2%%80%%AE%%C2%%9Bevil.example/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n' >&3
timeout 10 cat <&3 | head -n 1
exec 3<&-
`

// evilName is the file name jsonAgent makes; evilHost the host it asks for.
const (
	evilName = "x\u202etxt.exe\x1b[2J\x1b]0;pwned\x07\u009b31m\x7f"
	evilHost = "x\u202e\u009bevil.example"
)

// jsonOf runs a command that prints JSON, fails the test if the output
// holds a raw byte a terminal acts on, and decodes it into v.
func jsonOf(t *testing.T, e *Env, v any, args ...string) string {
	t.Helper()
	r := e.MustSandbox(args...)
	noRawTerminalBytes(t, strings.Join(args, " "), r.Stdout)
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, r.Stdout)
	}
	return r.Stdout
}

// checkNetJSON: net --json prints the proxy's denial of the agent's host,
// escaped, one JSON object a line, and it decodes to the exact host.
func checkNetJSON(t *testing.T, e *Env) {
	t.Helper()
	r := e.MustSandbox("net", "ja", "--json")
	noRawTerminalBytes(t, "net --json", r.Stdout)
	found := false
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec struct {
			Host     string `json:"host"`
			Decision string `json:"decision"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("net --json line %q: %v", line, err)
		}
		found = found || (rec.Host == evilHost && rec.Decision == "denied")
	}
	if !found {
		t.Errorf("net --json: no denial of %q:\n%s", evilHost, r.Stdout)
	}
}

// TestAttackJSONOutputIsEscaped: file names and host names the agent
// chooses reach ps --json, conflicts --json, rescue list --json and net
// --json, and a repository's setup command reaches config show (TOML).
// encoding/json (and the TOML encoder) write a right-to-left override,
// C1 controls and DEL raw, so the same name that text output escapes
// reached the terminal as it was. Every JSON output now escapes them as \u escapes: nothing a
// terminal acts on is printed, and decoding gives back the exact name.
func TestAttackJSONOutputIsEscaped(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\nmax_file_size = \"1k\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	e.MustSandbox("start", "ja", "--agent", "shell", "--", "bash", "-c", jsonAgent, "sh", "A\n")
	e.MustSandbox("start", "jb", "--agent", "shell", "--", "bash", "-c", jsonAgent, "sh", "B\n")

	// Both forms name the forecast's paths per other sandbox ("with").
	type forecast struct {
		With map[string][]string `json:"with"`
	}
	var rows []forecast
	out := jsonOf(t, e, &rows, "conflicts", "--json")
	if !slices.ContainsFunc(rows, func(f forecast) bool { return slices.Contains(f.With["jb"], evilName) }) {
		t.Errorf("conflicts --json does not decode to the agent's name %q:\n%s", evilName, out)
	}
	type psRow struct {
		Branch   string    `json:"branch"`
		Forecast *forecast `json:"forecast"`
	}
	var ps []psRow
	out = jsonOf(t, e, &ps, "ps", "--json")
	if !slices.ContainsFunc(ps, func(r psRow) bool {
		return r.Branch == "ja" && r.Forecast != nil && slices.Contains(r.Forecast.With["jb"], evilName)
	}) {
		t.Errorf("ps --json: ja's forecast does not name %q:\n%s", evilName, out)
	}
	type large struct {
		Path string `json:"path"`
	}
	type snapshot struct {
		TooLarge []large `json:"too_large"`
	}
	var snaps []snapshot
	out = jsonOf(t, e, &snaps, "rescue", "list", "ja", "--json")
	if !slices.ContainsFunc(snaps, func(s snapshot) bool { return slices.Contains(s.TooLarge, large{evilName + ".big"}) }) {
		t.Errorf("rescue list --json names no too-large %q:\n%s", evilName+".big", out)
	}
	checkNetJSON(t, e)
	// A repository's own text (its setup command) in config show, which
	// prints TOML: escaped inside its string the same way.
	e.WriteFile(".sandbox.toml", "setup = \"make \u202e\u009b\\u007f\\u001b[2J\"\n")
	r := e.MustSandbox("config", "show")
	noRawTerminalBytes(t, "config show", r.Stdout)
	if !strings.Contains(r.Stdout, `setup = "make \u202e\u009b\u007f\u001b[2J"`) {
		t.Errorf("config show does not print the repository's setup escaped:\n%s", r.Stdout)
	}
	// The text forms escape the same names (they always did).
	for _, args := range [][]string{{"net", "ja"}, {"conflicts"}, {"rescue", "list", "ja"}} {
		r := e.MustSandbox(args...)
		noRawTerminalBytes(t, strings.Join(args, " "), r.Stdout+r.Stderr)
	}
}
