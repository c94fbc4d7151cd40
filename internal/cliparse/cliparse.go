// Package cliparse parses a command line with kong against a model of the
// one command it names. Kong builds its model of a command line struct by
// reflection, every command and flag with its help interpolated; for a
// command line of many commands that costs more than a short command's
// own work. The whole model is still what help, --version and errors
// come from.
package cliparse

import (
	"io"
	"reflect"
	"strings"

	"github.com/alecthomas/kong"
)

// Options are kong's options for a parser writing to stdout and stderr,
// which sets *exit where kong would exit (after help or the version).
type Options func(stdout, stderr io.Writer, exit *int) []kong.Option

// Parse parses args. First against a model of cli's global flags and the
// one command the first word of args that is no flag names (unless it is
// one of whole); then, when that names no command, does not parse, or
// kong would exit (help, the version), against cli itself, with the real
// streams. The two agree on a command line that parses: the global flags
// are the same, so the same word names the command in both. target is the
// struct the values went into (cli's, or the one-command struct's); a nil
// parser is an error in the model itself.
func Parse(cli any, args []string, stdout, stderr io.Writer, opts Options, whole ...string) (parser *kong.Kong, kctx *kong.Context, target reflect.Value, exit int, err error) {
	if one, ok := OneCommand(reflect.TypeOf(cli).Elem(), args, whole...); ok {
		exit = -1
		parser, err = kong.New(one.Interface(), opts(io.Discard, io.Discard, &exit)...)
		if err == nil {
			kctx, err = parser.Parse(args)
		}
		if err == nil && exit < 0 {
			return parser, kctx, one.Elem(), -1, nil
		}
	}
	exit = -1
	if parser, err = kong.New(cli, opts(stdout, stderr, &exit)...); err != nil {
		return nil, nil, reflect.Value{}, exit, err
	}
	kctx, err = parser.Parse(args)
	return parser, kctx, reflect.ValueOf(cli).Elem(), exit, err
}

// OneCommand is a new value of a struct holding the fields of struct type
// t that are no command, and the one command the first word of args that
// is no flag names; false when it names none, or one of whole.
func OneCommand(t reflect.Type, args []string, whole ...string) (reflect.Value, bool) {
	word := ""
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			word = a
			break
		}
	}
	for _, w := range whole {
		if w == word {
			return reflect.Value{}, false
		}
	}
	var fields []reflect.StructField
	found := false
	for i := range t.NumField() {
		f := t.Field(i)
		if _, isCmd := f.Tag.Lookup("cmd"); isCmd {
			if CommandName(f) != word {
				continue
			}
			found = true
		}
		fields = append(fields, f)
	}
	if !found {
		return reflect.Value{}, false
	}
	return reflect.New(reflect.StructOf(fields)), true
}

// CommandName is the word that names the command of field f: its name
// tag, else its field name in lower case (kong's name for a one-word
// field; a field of more words needs a name tag to be found).
func CommandName(f reflect.StructField) string {
	if n := f.Tag.Get("name"); n != "" {
		return n
	}
	return strings.ToLower(f.Name)
}
