package devcontainer

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// A repository's Dockerfile is read here the way the engine's Dockerfile
// parser reads it (parser directives, the escape character, line
// continuations, comment lines inside them, builder flags with quotes),
// for two things only: every image it names — each FROM (ARGs before the
// first FROM resolved), COPY --from and RUN --mount from= naming an image
// rather than an earlier stage, and the same inside ONBUILD — so that the
// user's image policy sees them before anything is built; and ADD of a URL,
// which the engine itself would download on its own network, outside the
// sandbox's. Where the reading could differ from the engine's, it refuses
// rather than guess: a FROM whose variables cannot be resolved from the
// ARGs and build.args, quotes or escapes in an image name, a variable in
// --from.

// dockerLine is one instruction: its logical line, joined from the
// physical lines, and the line it starts on.
type dockerLine struct {
	text string
	line int
}

var (
	reDirective    = regexp.MustCompile(`^#[ \t]*([a-zA-Z][a-zA-Z0-9]*)[ \t]*=[ \t]*(.+?)[ \t]*$`)
	reCmdSplit     = regexp.MustCompile(`[\t\v\f\r ]+`)
	knownDirective = map[string]bool{"escape": true, "syntax": true, "check": true}
)

// dockerLines splits a Dockerfile into its instructions. Where versions
// of the engine's parser read a file differently it refuses: a line ending
// in an escaped escape character (older parsers continue it, newer ones do
// not), an escape directive after a directive older parsers do not know
// (they stop looking before it), or a second one.
func dockerLines(data []byte) ([]dockerLine, error) {
	text := strings.TrimPrefix(string(data), "\xef\xbb\xbf")
	phys := strings.Split(text, "\n")
	for i, l := range phys {
		phys[i] = strings.TrimSuffix(l, "\r")
	}
	escape, err := escapeDirective(phys)
	if err != nil {
		return nil, err
	}
	cont := regexp.MustCompile(regexp.QuoteMeta(escape) + `[ \t]*$`)
	escaped := regexp.MustCompile(regexp.QuoteMeta(escape+escape) + `[ \t]*$`)
	// continues strips the escape ending a line and says whether it did.
	continues := func(n int, l string) (string, bool, error) {
		if !cont.MatchString(l) {
			return l, false, nil
		}
		if escaped.MatchString(l) {
			return "", false, fmt.Errorf("line %d ends in an escaped %s, which versions of the engine read differently (a line continued or not)", n, escape)
		}
		return cont.ReplaceAllString(l, ""), true, nil
	}
	isComment := func(l string) bool { return strings.HasPrefix(strings.TrimLeftFunc(l, unicode.IsSpace), "#") }
	var out []dockerLine
	for i := 0; i < len(phys); {
		start := i + 1
		line := strings.TrimLeftFunc(phys[i], unicode.IsSpace)
		i++
		if strings.HasPrefix(line, "#") {
			continue
		}
		line, more, err := continues(start, line)
		if err != nil {
			return nil, err
		}
		if !more && strings.TrimSpace(line) == "" {
			continue
		}
		for more && i < len(phys) {
			next := phys[i]
			i++
			if isComment(next) || strings.TrimSpace(next) == "" {
				continue
			}
			if next, more, err = continues(i, next); err != nil {
				return nil, err
			}
			line += next
		}
		out = append(out, dockerLine{text: line, line: start})
	}
	return out, nil
}

// escapeDirective reads the parser directives at the top of the file and
// returns the escape character.
func escapeDirective(phys []string) (string, error) {
	escape, seen := `\`, map[string]bool{}
	for i, l := range phys {
		m := reDirective.FindStringSubmatch(strings.TrimLeftFunc(l, unicode.IsSpace))
		if m == nil || !knownDirective[strings.ToLower(m[1])] {
			break
		}
		name := strings.ToLower(m[1])
		if name == "escape" {
			switch {
			case seen["escape"]:
				return "", fmt.Errorf("line %d: a second escape directive", i+1)
			case seen["check"]:
				return "", fmt.Errorf("line %d: an escape directive after a check directive, which versions of the engine read differently", i+1)
			case m[2] != "`" && m[2] != `\`:
				return "", fmt.Errorf("line %d: escape directive %q is neither ` nor \\", i+1, m[2])
			}
			escape = m[2]
		}
		seen[name] = true
	}
	return escape, nil
}

// splitInstruction returns an instruction's keyword (lower case), its
// builder flags (--name=value words, quotes removed) and the rest.
func splitInstruction(line string) (cmd string, flags []string, rest string) {
	parts := reCmdSplit.Split(strings.TrimSpace(line), 2)
	cmd = strings.ToLower(parts[0])
	if len(parts) == 2 {
		rest, flags = builderFlags(parts[1])
	}
	return cmd, flags, strings.TrimSpace(rest)
}

// builderFlags reads the leading --flag words of an instruction's
// arguments as the engine does: words separated by spaces, quotes grouping
// and removed, a backslash taking the next character; the first word that
// does not start with -- (or a bare --) ends them.
func builderFlags(line string) (rest string, words []string) {
	const (
		inSpaces = iota
		inWord
		inQuote
	)
	phase, word, quote, blankOK := inSpaces, "", byte(0), false
	for pos := 0; pos <= len(line); pos++ {
		var ch byte
		if pos < len(line) {
			ch = line[pos]
		}
		if phase == inSpaces {
			if pos == len(line) {
				break
			}
			if unicode.IsSpace(rune(ch)) {
				continue
			}
			if ch != '-' || pos+1 == len(line) || line[pos+1] != '-' {
				return line[pos:], words
			}
			phase = inWord
		}
		if pos == len(line) {
			if word != "--" && (blankOK || word != "") {
				words = append(words, word)
			}
			break
		}
		if phase == inWord {
			switch {
			case unicode.IsSpace(rune(ch)):
				phase = inSpaces
				if word == "--" {
					return line[pos:], words
				}
				if blankOK || word != "" {
					words = append(words, word)
				}
				word, blankOK = "", false
				continue
			case ch == '\'' || ch == '"':
				quote, blankOK, phase = ch, true, inQuote
				continue
			case ch == '\\':
				if pos+1 == len(line) {
					continue
				}
				pos++
				ch = line[pos]
			}
			word += string(ch)
			continue
		}
		// inQuote
		if ch == quote {
			phase = inWord
			continue
		}
		if ch == '\\' {
			if pos+1 == len(line) {
				phase = inWord
				continue
			}
			pos++
			ch = line[pos]
		}
		word += string(ch)
	}
	return "", words
}

// flagValues returns the values of the flags called name (any case).
func flagValues(flags []string, name string) []string {
	var out []string
	for _, f := range flags {
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if strings.EqualFold(k, name) {
			out = append(out, v)
		}
	}
	return out
}

// metaArg is an ARG before the first FROM: set or not, its value, or why
// its value cannot be known.
type metaArg struct {
	value   string
	set     bool
	unknown string
}

// proxyArgs are the build arguments the engine knows without an ARG, and
// git sandbox sets for the build (the egress proxy): a FROM using one is
// not resolved here.
var proxyArgs = map[string]bool{
	"HTTP_PROXY": true, "http_proxy": true, "HTTPS_PROXY": true, "https_proxy": true,
	"FTP_PROXY": true, "ftp_proxy": true, "NO_PROXY": true, "no_proxy": true,
	"ALL_PROXY": true, "all_proxy": true,
}

// dockerScan walks a Dockerfile's instructions.
type dockerScan struct {
	file      string
	buildArgs map[string]string
	meta      map[string]metaArg
	stages    map[string]bool
	seenFrom  bool
	images    []config.ImageChoice
}

// ScanDockerfile lists every image a Dockerfile names (see above), with
// the file and line; buildArgs are devcontainer.json's build.args. It
// refuses a name it cannot resolve and an ADD of a URL.
func ScanDockerfile(file string, data []byte, buildArgs map[string]string) ([]config.ImageChoice, error) {
	lines, err := dockerLines(data)
	if err != nil {
		return nil, usererr.Wrap(err, "%s: %v", termsafe.String(file), err).
			Hint("fix the Dockerfile, or pick an image with --image")
	}
	s := &dockerScan{file: file, buildArgs: buildArgs, meta: map[string]metaArg{}, stages: map[string]bool{}}
	for _, l := range lines {
		if err := s.instruction(l, l.text, ""); err != nil {
			return nil, err
		}
	}
	return s.images, nil
}

// refuse is an instruction the scan cannot let through.
func (s *dockerScan) refuse(l dockerLine, format string, args ...any) *usererr.Error {
	return usererr.New("%s line %d: %s", termsafe.String(s.file), l.line, fmt.Sprintf(format, args...))
}

func (s *dockerScan) image(l dockerLine, ref, what string) {
	s.images = append(s.images, config.ImageChoice{Image: ref, File: s.file, Line: l.line, What: what})
}

// instruction scans one instruction; within is "ONBUILD " for a trigger.
func (s *dockerScan) instruction(l dockerLine, text, within string) error {
	cmd, flags, rest := splitInstruction(text)
	switch cmd {
	case "arg":
		if !s.seenFrom && within == "" {
			s.metaArgs(rest)
		}
	case "from":
		return s.from(l, flags, rest, within)
	case "copy":
		for _, from := range flagValues(flags, "from") {
			if err := s.stageOrImage(l, from, within+"COPY --from"); err != nil {
				return err
			}
		}
	case "run":
		for _, m := range flagValues(flags, "mount") {
			if err := s.mountFrom(l, m, within); err != nil {
				return err
			}
		}
	case "add":
		return s.add(l, rest)
	case "onbuild":
		if within != "" {
			return s.refuse(l, "ONBUILD inside ONBUILD").Hint("fix the Dockerfile, or pick an image with --image")
		}
		return s.instruction(l, rest, "ONBUILD ")
	}
	return nil
}

// metaArgs records ARG NAME[=VALUE] … before the first FROM: a build
// argument from devcontainer.json wins; a default is taken as written
// (or inside one pair of quotes) when it has no variables, escapes or
// other quotes; ARG NAME alone leaves NAME unset. An ARG declared twice
// is not resolved (versions of the engine keep the first value or not).
func (s *dockerScan) metaArgs(rest string) {
	for _, w := range strings.Fields(rest) {
		name, def, hasDef := strings.Cut(w, "=")
		var a metaArg
		_, again := s.meta[name]
		switch v, given := s.buildArgs[name]; {
		case again:
			a.unknown = "ARG " + name + " is declared twice before the first FROM"
		case proxyArgs[name]:
			a.unknown = name + " is set by git sandbox for the build's proxy"
		case given:
			a = metaArg{value: v, set: true}
		case !hasDef:
		default:
			if len(def) >= 2 && (def[0] == '"' || def[0] == '\'') && def[len(def)-1] == def[0] {
				def = def[1 : len(def)-1]
			}
			if strings.ContainsAny(def, "$'\"\\`") {
				a.unknown = "the default of ARG " + name + " is not a plain value (give it one in build.args)"
			} else {
				a = metaArg{value: def, set: true}
			}
		}
		s.meta[name] = a
	}
}

// from scans FROM [--platform=…] IMAGE [AS NAME].
func (s *dockerScan) from(l dockerLine, _ []string, rest, within string) error {
	s.seenFrom = true
	words := strings.Fields(rest)
	if len(words) != 1 && (len(words) != 3 || !strings.EqualFold(words[1], "as")) {
		return s.refuse(l, "FROM %s is not FROM IMAGE [AS NAME]", termsafe.String(strconv.Quote(rest))).
			Hint("fix the Dockerfile, or pick an image with --image")
	}
	ref, why := s.expand(words[0])
	if why != "" {
		return s.refuse(l, "the image of FROM %s cannot be resolved: %s", termsafe.String(words[0]), why).
			Hint("write the image's name, or give the ARG it uses a value in build.args of devcontainer.json").
			Hint("git sandbox checks every image a repository names against your allowed_images before it builds anything")
	}
	if ref != "scratch" && !s.stages[strings.ToLower(ref)] {
		s.image(l, ref, within+"FROM")
	}
	if len(words) == 3 {
		s.stages[strings.ToLower(words[2])] = true
	}
	return nil
}

// stageOrImage records from (a --from value) as an image unless it names
// an earlier stage, by name or number. Inside ONBUILD the stages are those
// of a later build, unknown here: every name counts as an image.
func (s *dockerScan) stageOrImage(l dockerLine, from, what string) error {
	if strings.ContainsAny(from, "$'\"\\`") {
		return s.refuse(l, "%s=%s uses a variable or quotes, which git sandbox does not resolve", what, termsafe.String(from)).
			Hint("name the stage or image as it is, or pick an image with --image")
	}
	if _, err := strconv.Atoi(from); err == nil {
		return nil // a stage by number, never an image
	}
	if strings.HasPrefix(what, "ONBUILD") || !s.stages[strings.ToLower(from)] {
		s.image(l, from, what)
	}
	return nil
}

// mountFrom scans one RUN --mount value for from=.
func (s *dockerScan) mountFrom(l dockerLine, value, within string) error {
	fields, err := csv.NewReader(strings.NewReader(value)).Read()
	if err != nil {
		return s.refuse(l, "RUN --mount=%s cannot be read: %v", termsafe.String(value), err).
			Hint("fix the Dockerfile, or pick an image with --image")
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		if strings.EqualFold(strings.TrimSpace(k), "from") {
			if err := s.stageOrImage(l, v, within+"RUN --mount from"); err != nil {
				return err
			}
		}
	}
	return nil
}

// add refuses an ADD whose source is a URL (or could become one): the
// engine downloads it itself, on its own network, outside the sandbox's.
func (s *dockerScan) add(l dockerLine, rest string) error {
	var args []string
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &args); err != nil {
			args = strings.Fields(rest)
		}
	} else {
		args = strings.Fields(rest)
	}
	if len(args) > 1 {
		args = args[:len(args)-1] // the destination
	}
	for _, src := range args {
		if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") || strings.Contains(src, "$") {
			return s.refuse(l, "ADD %s: the engine would download it itself, outside the sandbox's network policy", termsafe.String(src)).
				Hint("download it in a RUN step (which runs under the sandbox's network), or COPY it from the repository").
				Hint("or pick an image with --image")
		}
	}
	return nil
}

// expand resolves $NAME, ${NAME}, ${NAME:-word}, ${NAME-word},
// ${NAME:+word} and ${NAME+word} from the ARGs before the first FROM, as
// the engine does for a FROM. Anything else — quotes, escapes, other
// forms, an ARG without a known value, a name given in build.args but not
// declared — is not resolved, and why is said.
func (s *dockerScan) expand(word string) (string, string) {
	if strings.ContainsAny(word, "'\"\\`") {
		return "", "quotes or escapes in an image name"
	}
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		if word[i] != '$' {
			b.WriteByte(word[i])
			continue
		}
		name, op, arg, n, ok := variableAt(word[i:])
		if !ok {
			return "", "a $ that is not $NAME or ${NAME[:-+]word}"
		}
		i += n - 1
		v, why := s.variable(name, op, arg)
		if why != "" {
			return "", why
		}
		b.WriteString(v)
	}
	if b.Len() == 0 {
		return "", "it is empty"
	}
	return b.String(), ""
}

// variableAt reads the variable at the start of w ("$…"): its name, the
// operator and its word, and how many bytes it takes.
func variableAt(w string) (name, op, arg string, n int, ok bool) {
	isName := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if len(w) > 1 && w[1] != '{' {
		j := 1
		for j < len(w) && isName(w[j]) {
			j++
		}
		return w[1:j], "", "", j, j > 1
	}
	end := strings.IndexByte(w, '}')
	if end < 0 {
		return "", "", "", 0, false
	}
	inner := w[2:end]
	j := 0
	for j < len(inner) && isName(inner[j]) {
		j++
	}
	name, rest := inner[:j], inner[j:]
	for _, o := range []string{":-", ":+", "-", "+"} {
		if strings.HasPrefix(rest, o) {
			op, arg = o, rest[len(o):]
			break
		}
	}
	if name == "" || op == "" && rest != "" || strings.ContainsAny(arg, "${}") {
		return "", "", "", 0, false
	}
	return name, op, arg, end + 1, true
}

// variable is one variable's value under op. An ARG declared without a
// value is unset, as is a name no ARG before the first FROM declares
// (the engine substitutes only those); a name build.args gives without
// such an ARG, or one of the proxy's arguments, is not resolved.
func (s *dockerScan) variable(name, op, arg string) (string, string) {
	a, declared := s.meta[name]
	switch _, given := s.buildArgs[name]; {
	case proxyArgs[name]:
		return "", name + " is set by git sandbox for the build's proxy"
	case !declared && given:
		return "", "build.args gives " + name + ", but no ARG before the first FROM declares it"
	case a.unknown != "":
		return "", a.unknown
	}
	switch op {
	case "":
		return a.value, ""
	case ":-":
		if a.set && a.value != "" {
			return a.value, ""
		}
		return arg, ""
	case "-":
		if a.set {
			return a.value, ""
		}
		return arg, ""
	case ":+":
		if a.set && a.value != "" {
			return arg, ""
		}
		return "", ""
	default: // "+"
		if a.set {
			return arg, ""
		}
		return "", ""
	}
}
