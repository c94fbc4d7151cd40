package main

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/cliparse"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// TestHelpNamesTheRegisteredAgents: the agents help offers are those the
// registry has, so adding an adapter updates the help without a copy to
// keep in step.
func TestHelpNamesTheRegisteredAgents(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"start", "--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("start --help: exit %d\n%s", code, stderr.String())
	}
	help := strings.Join(strings.Fields(stdout.String()), " ")
	if want := "Agent: " + orList(agent.Names()) + " "; !strings.Contains(help, want) {
		t.Errorf("start --help lacks %q:\n%s", want, stdout.String())
	}
	stdout.Reset()
	if code := Main([]string{"image", "build", "--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("image build --help: exit %d\n%s", code, stderr.String())
	}
	help = strings.Join(strings.Fields(stdout.String()), " ")
	if want := "install the " + andList(agent.Installable()) + " CLIs"; !strings.Contains(help, want) {
		t.Errorf("image build --help lacks %q:\n%s", want, stdout.String())
	}
}

func TestJoinLast(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"shell"}, "shell"},
		{[]string{"claude", "shell"}, "claude or shell"},
		{[]string{"claude", "codex", "shell"}, "claude, codex or shell"},
	} {
		if got := orList(tc.in); got != tc.want {
			t.Errorf("orList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitAllow(t *testing.T) {
	got := splitAllow([]string{"a.test,b.test:8443", "api.test GET,HEAD /repos/", "c.test"})
	want := []string{"a.test", "b.test:8443", "api.test GET,HEAD /repos/", "c.test"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestOneCommandModel: every command kong knows is found by the word
// that names it, and a command line parsed against the model of its one
// command selects the same command with the same values as against the
// whole model; help, --version and errors come from the whole model.
func TestOneCommandModel(t *testing.T) {
	whole := func(args []string, out io.Writer) (*CLI, *kong.Context, int, error) {
		var cli CLI
		exit := -1
		p, err := kong.New(&cli, kongOptions(out, out, &exit)...)
		if err != nil {
			t.Fatal(err)
		}
		kctx, err := p.Parse(args)
		return &cli, kctx, exit, err
	}
	var full CLI
	exit := -1
	parser, err := kong.New(&full, kongOptions(io.Discard, io.Discard, &exit)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parser.Model.Children {
		if _, ok := cliparse.OneCommand(reflect.TypeOf(CLI{}), []string{c.Name}); !ok {
			t.Errorf("command %q has no one-command model: give its field a name tag", c.Name)
		}
	}
	for _, args := range [][]string{
		{"ps", "--json"},
		{"-C", "/tmp", "ps"},
		{"start", "-d", "b", "--agent", "shell", "--network", "none", "--", "sh", "-c", "x --help"},
		{"land", "b", "--keep", "-m", "message"},
		{"config"},
		{"net", "b"},
		{"rescue", "list", "b"},
		{"__supervise", "b"},
	} {
		cli, want, _, err := whole(args, io.Discard)
		if err != nil {
			t.Fatalf("%q against the whole model: %v", args, err)
		}
		_, got, dir, code, err := parseArgs(args, io.Discard, io.Discard)
		if err != nil || code >= 0 || got.Command() != want.Command() || dir != cli.Dir {
			t.Errorf("%q: command %q, dir %q, exit %d, %v; want %q, dir %q", args, got.Command(), dir, code, err, want.Command(), cli.Dir)
			continue
		}
		one := got.Model.Target
		name := one.Type().Field(one.NumField() - 1).Name
		if g, w := one.FieldByName(name).Interface(), reflect.ValueOf(cli).Elem().FieldByName(name).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("%q: one-command values %+v, the whole model's %+v", args, g, w)
		}
	}
	for _, args := range [][]string{{"ps", "--help"}, {"--version"}, {"land", "--version"}, {"ps", "--bogus"}, {"ps", "extra"}, {"rescue"}} {
		var ours, theirs bytes.Buffer
		code := Main(args, strings.NewReader(""), &ours, &ours)
		_, _, exit, err := whole(args, &theirs)
		switch {
		case exit >= 0:
			if code != exit || ours.String() != theirs.String() {
				t.Errorf("%q: exit %d, printed %q; the whole model: exit %d, %q", args, code, ours.String(), exit, theirs.String())
			}
		case err == nil:
			t.Errorf("%q parsed", args)
		case code != usererr.ExitUsage || !strings.Contains(ours.String(), err.Error()):
			t.Errorf("%q: exit %d, printed %q; want the whole model's error %q", args, code, ours.String(), err)
		}
	}
}
