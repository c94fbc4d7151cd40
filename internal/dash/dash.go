// Package dash is git sandbox's interactive dashboard: a live table of a
// repository's sandboxes, refreshed from the container engine's events,
// with one key per action. It is built on Bubble Tea (the Elm-style model,
// update and view, the terminal's raw mode, the alternate screen and its
// restoration on exit). Every action runs the tool's own command line —
// `git sandbox land BRANCH --expect TREE`, `attach`, `diff`, … — so the
// dashboard can do nothing a user at the prompt could not, and every
// refusal and hint reads as it does there.
package dash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Backend is what the dashboard reads: the sandboxes and a signal when
// their containers change. *sandbox.Env is one.
type Backend interface {
	Statuses(ctx context.Context) ([]sandbox.Status, error)
	Changes(ctx context.Context) (<-chan struct{}, <-chan error)
}

// Options describe a dashboard.
type Options struct {
	Backend Backend
	// Dir is the repository the actions run in (git sandbox -C Dir …).
	Dir string
	// NoColor turns colours off (NO_COLOR).
	NoColor bool
	// Tick refreshes the ages this often (default 5s).
	Tick time.Duration
	// Held reads the connections a sandbox's proxy holds for an answer
	// (network_prompt); nil shows none.
	Held func(branch string) ([]held.Request, error)
}

// Run shows the dashboard until the user quits or ctx ends.
func Run(ctx context.Context, o Options) error {
	// SIGINT, SIGTERM and SIGHUP end the dashboard through the process's
	// one signal stack (not Bubble Tea's own handler); ending its context
	// restores the terminal. Ctrl-C on the keyboard is a key in raw mode,
	// but while an action has the terminal (a pager, a shell) the terminal
	// sends SIGINT to the whole process group: the action handles it, the
	// dashboard ignores it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newModel(ctx, o)
	pop := sigstack.Push(func(sig os.Signal) {
		if sig == os.Interrupt && m.execing.Load() {
			return
		}
		cancel()
	})
	defer pop()
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithoutSignalHandler())
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// mode is what the keys currently do.
type mode int

const (
	modeList    mode = iota
	modeConfirm      // y/n for land or rm
	modeInput        // the new sandbox's fields
	modeText         // a page of text (help, output); any key closes it
)

type model struct {
	ctx     context.Context
	o       Options
	changes <-chan struct{}
	errc    <-chan error

	list    []sandbox.Status
	err     error
	cursor  int
	width   int
	height  int
	loading bool
	again   bool // a refresh was asked for while one ran

	mode    mode
	confirm pending
	status  string // the last action's outcome, one line

	text      []string
	textTitle string

	inputs []field
	field  int

	held     []question      // held connections' questions, oldest first
	answered map[string]bool // the questions answered, by id

	// execing is set while an interactive action has the terminal.
	execing atomic.Bool

	// run runs one git sandbox command: interactive ones get the terminal,
	// others are captured. Tests replace it.
	run func(args []string, interactive bool) tea.Cmd
}

// pending is an action waiting for y.
type pending struct {
	question string
	args     []string
}

// field is one line of the new-sandbox form.
type field struct {
	label, value string
}

type (
	listMsg struct {
		list []sandbox.Status
		err  error
	}
	changedMsg   struct{}
	streamEndMsg struct{ err error }
	tickMsg      struct{}
	doneMsg      struct {
		args   []string
		output string
		err    error
		page   bool // show the output as a page
	}
)

func newModel(ctx context.Context, o Options) *model {
	if o.Tick <= 0 {
		o.Tick = 5 * time.Second
	}
	m := &model{ctx: ctx, o: o, width: 80, height: 24}
	m.run = m.runSelf
	return m
}

func (m *model) Init() tea.Cmd {
	m.changes, m.errc = m.o.Backend.Changes(m.ctx)
	m.loading = true
	return tea.Batch(m.load(), m.waitChange(), m.tick(), m.heldTick())
}

func (m *model) load() tea.Cmd {
	return func() tea.Msg {
		list, err := m.o.Backend.Statuses(m.ctx)
		return listMsg{list, err}
	}
}

func (m *model) waitChange() tea.Cmd {
	return func() tea.Msg {
		if _, ok := <-m.changes; !ok {
			return streamEndMsg{<-m.errc}
		}
		return changedMsg{}
	}
}

func (m *model) tick() tea.Cmd {
	return tea.Tick(m.o.Tick, func(time.Time) tea.Msg { return tickMsg{} })
}

// refresh loads the list unless a load runs; then it loads once more after.
func (m *model) refresh() tea.Cmd {
	if m.loading {
		m.again = true
		return nil
	}
	m.loading = true
	return m.load()
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case listMsg:
		m.loading = false
		m.list, m.err = msg.list, msg.err
		if m.cursor >= len(m.list) {
			m.cursor = max(0, len(m.list)-1)
		}
		if m.again {
			m.again = false
			return m, m.refresh()
		}
		return m, nil
	case changedMsg:
		return m, tea.Batch(m.refresh(), m.waitChange())
	case streamEndMsg:
		if msg.err != nil {
			m.status = "live updates stopped (" + termsafe.String(msg.err.Error()) + "); refreshing every " + m.o.Tick.String()
		}
		return m, nil
	case tickMsg:
		return m, tea.Batch(m.refresh(), m.tick())
	case heldTickMsg:
		return m, tea.Batch(m.loadHeld(), m.heldTick())
	case heldMsg:
		m.showHeld(msg.qs)
		return m, nil
	case doneMsg:
		m.finish(msg)
		return m, m.refresh()
	case tea.KeyMsg:
		if m.mode != modeList {
			return m.key(msg)
		}
		if cmd, ok := m.heldKey(msg.String()); ok {
			return m, cmd
		}
		return m.key(msg)
	}
	return m, nil
}

// finish shows an action's outcome.
func (m *model) finish(d doneMsg) {
	// Split first, then escape each line: escaped whole, the output would
	// be one line with its newlines shown as \x0a.
	out := strings.TrimRight(d.output, "\n")
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = termsafe.String(l)
	}
	if d.page {
		m.showText("git sandbox "+termsafe.String(strings.Join(d.args, " ")), lines)
		return
	}
	// "land d1", not "land --expect …".
	name := d.args[0]
	if len(d.args) > 1 {
		name += " " + termsafe.String(d.args[len(d.args)-1])
	}
	switch {
	case d.err != nil && out != "":
		if len(lines) > 1 {
			m.showText(name+" failed", lines)
			return
		}
		m.status = name + ": " + lines[0]
	case d.err != nil:
		m.status = name + ": " + d.err.Error()
	default:
		m.status = name + ": done"
		if out != "" {
			m.status = name + ": " + lines[len(lines)-1]
		}
	}
}

func (m *model) showText(title string, lines []string) {
	m.mode, m.textTitle, m.text = modeText, title, lines
}

func (m *model) selected() (sandbox.Status, bool) {
	if m.cursor < 0 || m.cursor >= len(m.list) {
		return sandbox.Status{}, false
	}
	return m.list[m.cursor], true
}

func (m *model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	switch m.mode {
	case modeText:
		m.mode = modeList
		return m, nil
	case modeConfirm:
		m.mode = modeList
		if k.String() == "y" || k.String() == "Y" {
			args := m.confirm.args
			m.status = "git sandbox " + strings.Join(args, " ") + " …"
			return m, m.run(args, false)
		}
		m.status = "cancelled"
		return m, nil
	case modeInput:
		return m.input(k)
	}
	sb, ok := m.selected()
	branch := sb.Branch
	switch k.String() {
	case "q", "esc":
		return m, tea.Quit
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.cursor < len(m.list)-1 {
			m.cursor++
		}
	case "?":
		m.showText("keys", helpLines)
	case "n":
		m.mode, m.field = modeInput, 0
		m.inputs = []field{{label: "branch"}, {label: "agent"}, {label: "prompt"}}
	case "r":
		args := []string{"rescue", "list"}
		if ok {
			args = append(args, "--", branch)
		}
		return m, m.runPage(args)
	}
	if !ok {
		return m, nil
	}
	switch k.String() {
	case "enter":
		return m, m.run([]string{"attach", "--", branch}, true)
	case "d":
		return m, m.run([]string{"diff", "--", branch}, true)
	case "e":
		return m, m.run([]string{"exec", "--", branch}, true)
	case "l":
		if sb.SnapshotTree == "" {
			m.status = "no snapshot of " + termsafe.String(branch) + " to land yet"
			return m, nil
		}
		// The tree on screen is the one landed: if the work changed since,
		// land refuses.
		m.ask(fmt.Sprintf("land %s onto %s (tree %s)? y/N", termsafe.String(branch), termsafe.String(sb.Base), sb.SnapshotTree[:min(12, len(sb.SnapshotTree))]),
			[]string{"land", "--expect", sb.SnapshotTree, "--", branch})
	case "x":
		m.ask(fmt.Sprintf("remove %s (its snapshots are kept)? y/N", termsafe.String(branch)), []string{"rm", "--", branch})
	case "u":
		m.status = "git sandbox update " + termsafe.String(branch) + " …"
		return m, m.run([]string{"update", "--", branch}, false)
	case "s":
		m.status = "git sandbox stop " + termsafe.String(branch) + " …"
		return m, m.run([]string{"stop", "--", branch}, false)
	case "c":
		// CHG is as old as the newest snapshot: take one now.
		m.status = "git sandbox rescue snapshot " + termsafe.String(branch) + " …"
		return m, m.run([]string{"rescue", "snapshot", "--", branch}, false)
	}
	return m, nil
}

func (m *model) ask(q string, args []string) {
	m.mode, m.confirm = modeConfirm, pending{question: q, args: args}
}

// input edits the new-sandbox form: enter goes to the next field, and on
// the last one starts the sandbox (detached); esc cancels.
func (m *model) input(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	f := &m.inputs[m.field]
	switch k.Type {
	case tea.KeyEsc:
		m.mode, m.status = modeList, "cancelled"
	case tea.KeyBackspace:
		if r := []rune(f.value); len(r) > 0 {
			f.value = string(r[:len(r)-1])
		}
	case tea.KeyEnter, tea.KeyTab:
		if m.field < len(m.inputs)-1 {
			m.field++
			return m, nil
		}
		m.mode = modeList
		branch, agent, prompt := strings.TrimSpace(m.inputs[0].value), strings.TrimSpace(m.inputs[1].value), m.inputs[2].value
		if branch == "" {
			m.status = "a new sandbox needs a branch"
			return m, nil
		}
		args := []string{"start", "-d"}
		if agent != "" {
			args = append(args, "--agent", agent)
		}
		if strings.TrimSpace(prompt) != "" {
			args = append(args, "-p", prompt)
		}
		args = append(args, "--", branch)
		m.status = "git sandbox start " + termsafe.String(branch) + " …"
		return m, m.run(args, false)
	case tea.KeyRunes, tea.KeySpace:
		f.value += string(k.Runes)
		if k.Type == tea.KeySpace {
			f.value += " "
		}
	}
	return m, nil
}

// runSelf runs git sandbox ARGS: with the terminal (the dashboard steps
// aside until it ends), or captured.
func (m *model) runSelf(args []string, interactive bool) tea.Cmd {
	full := append([]string{"-C", m.o.Dir}, args...)
	cmd, err := proc.Self(m.o.Dir, full...)
	if err != nil {
		return func() tea.Msg { return doneMsg{args: args, err: err} }
	}
	if interactive {
		// Its messages reach the terminal, and are kept: the dashboard's
		// screen comes back over them when the command ends.
		var stderr tailBuffer
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
		m.execing.Store(true)
		return tea.ExecProcess(cmd, func(err error) tea.Msg {
			m.execing.Store(false)
			d := doneMsg{args: args, err: err}
			if err != nil {
				d.output = stderr.String()
			}
			return d
		})
	}
	return func() tea.Msg {
		cmd.Stdin = nil
		out, err := cmd.CombinedOutput()
		return doneMsg{args: args, output: string(out), err: err}
	}
}

// tailBuffer keeps the last 16 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 16<<10; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// runPage runs a command whose output is read as a page.
func (m *model) runPage(args []string) tea.Cmd {
	run := m.run(args, false)
	return func() tea.Msg {
		msg := run()
		if d, ok := msg.(doneMsg); ok && d.err == nil {
			d.page = true
			return d
		}
		return msg
	}
}

var helpLines = []string{
	"enter  attach to the agent (detach keys as git sandbox attach)",
	"d      diff: exactly what land would apply (in the pager)",
	"l      land the work shown (asks first; refused if it changed since)",
	"u      update: bring the base branch's new commits in",
	"s      stop the agent (its work is kept)",
	"x      remove the sandbox (asks first; snapshots are kept)",
	"e      a shell in the sandbox",
	"r      rescue list: the selected sandbox's snapshots",
	"c      count the changes now (takes a snapshot; CHG is otherwise as",
	"       old as SNAP)",
	"n      new sandbox (branch, agent, prompt; runs detached)",
	"j/k    move; ?  this help; q  quit",
	"",
	"HELD (network_prompt): a connection waits for your answer:",
	"o  allow once   a  allow for the sandbox",
	"A  allow for the repository (your config)   D  deny",
	"",
	"STATE !N: an update left N files with conflict markers.",
	"CONFLICTS: base = landing now conflicts with the base branch;",
	"names = the sandboxes it would conflict with if both landed.",
	"SNAP is the age of the snapshot CHG counts; a running agent is",
	"snapshotted every rescue.interval, or now with c.",
}

// View draws the screen.
func (m *model) View() string {
	var b strings.Builder
	w, h := max(20, m.width), max(5, m.height)
	title := fmt.Sprintf("git sandbox dash — %d sandbox(es)", len(m.list))
	b.WriteString(m.style(bold, fit(title, w)) + "\n")
	switch m.mode {
	case modeText:
		b.WriteString(m.style(bold, fit(m.textTitle, w)) + "\n")
		for i, l := range m.text {
			if i >= h-3 {
				b.WriteString(fit(fmt.Sprintf("… %d more line(s)", len(m.text)-i), w) + "\n")
				break
			}
			b.WriteString(fit(l, w) + "\n")
		}
		b.WriteString(m.style(dim, fit("any key returns", w)))
		return b.String()
	case modeInput:
		b.WriteString(fit("new sandbox — enter: next field / start, esc: cancel", w) + "\n")
		for i, f := range m.inputs {
			line := fmt.Sprintf("%-7s %s", f.label+":", f.value)
			if i == m.field {
				line += "_"
			}
			b.WriteString(fit(line, w) + "\n")
		}
		return b.String()
	}
	rows := m.rows()
	widths := columnWidths(rows, w)
	b.WriteString(m.style(bold, renderRow(rows[0], widths, w)) + "\n")
	body := h - 4
	first := 0
	if m.cursor >= body {
		first = m.cursor - body + 1
	}
	for i := first; i < len(rows)-1 && i-first < body; i++ {
		line := renderRow(rows[i+1], widths, w)
		if i == m.cursor {
			line = m.style(reverse, line)
		} else {
			line = m.colour(m.list[i], line)
		}
		b.WriteString(line + "\n")
	}
	if len(m.list) == 0 {
		b.WriteString(fit("no sandboxes — n starts one", w) + "\n")
	}
	for i := max(1, len(m.list)); i < body; i++ {
		b.WriteString("\n")
	}
	if len(m.held) > 0 {
		b.WriteString(m.style(bold, fit(m.heldLine(), w)) + "\n")
	} else {
		b.WriteString(m.style(dim, fit(m.detail(), w)) + "\n")
	}
	footer := "enter attach  d diff  l land  u update  s stop  x rm  e shell  r rescue  n new  ? help  q quit"
	switch {
	case m.mode == modeConfirm:
		footer = m.style(bold, m.confirm.question)
	case m.err != nil:
		footer = "error: " + termsafe.String(m.err.Error())
	case m.status != "":
		footer = m.status
	}
	b.WriteString(fit(footer, w))
	return b.String()
}

// detail is the selected sandbox's line under the table: its base, the
// tree land would take, and what the agent reported spending.
func (m *model) detail() string {
	s, ok := m.selected()
	if !ok {
		return ""
	}
	d := termsafe.String(s.Branch) + " → " + termsafe.String(s.Base)
	if s.SnapshotTree != "" {
		d += "  tree " + s.SnapshotTree[:min(12, len(s.SnapshotTree))]
	}
	if s.Usage != nil {
		d += fmt.Sprintf("  usage $%.4f, %d in / %d out tokens", s.Usage.CostUSD, s.Usage.InputTokens, s.Usage.OutputTokens)
	}
	return d
}

// rows is the header and one row per sandbox, every cell escaped.
func (m *model) rows() [][]string {
	rows := [][]string{{"BRANCH", "STATE", "AGENT", "AGE", "CHG", "SNAP", "VERIFY", "DENY", "SPEND", "CONFLICTS"}}
	for _, s := range m.list {
		state := s.State
		if s.State == sandbox.StateExited && s.ExitCode != nil {
			state = "exited(" + strconv.Itoa(*s.ExitCode) + ")"
		}
		if s.Spend != nil && s.Spend.Over && s.State == sandbox.StateRunning {
			state = "budget"
		}
		if len(s.Conflicts) > 0 {
			// An update left conflict markers (ps names the paths).
			state += "!" + strconv.Itoa(len(s.Conflicts))
		}
		snap := "-"
		if !s.SnapshotTime.IsZero() {
			snap = Age(time.Since(s.SnapshotTime))
		}
		verdict := s.Verdict
		if verdict == "" {
			verdict = "-"
		}
		deny := "-"
		if s.Network == "allowlist" {
			deny = strconv.Itoa(s.Denied)
		}
		rows = append(rows, []string{
			termsafe.String(s.Branch), state, termsafe.String(s.Agent), Age(time.Since(s.Created)),
			strconv.Itoa(s.Changes), snap, verdict, deny, s.Spend.Short(), s.Forecast.Column(),
		})
	}
	return rows
}

// columnWidths fits the columns into width: the branch and the conflicts
// give way first.
func columnWidths(rows [][]string, width int) []int {
	ws := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			ws[i] = max(ws[i], len([]rune(c)))
		}
	}
	total := func() int {
		t := 0
		for _, x := range ws {
			t += x + 1
		}
		return t
	}
	for _, i := range []int{0, len(ws) - 1} {
		if over := total() - width; over > 0 {
			ws[i] = max(6, ws[i]-over)
		}
	}
	return ws
}

func renderRow(cells []string, ws []int, width int) string {
	var b strings.Builder
	for i, c := range cells {
		c = fit(c, ws[i])
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", ws[i]-len([]rune(c))+1))
		}
	}
	return fit(strings.TrimRight(b.String(), " "), width)
}

// fit cuts s to n columns, marking the cut.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

// Age is a duration as ps shows it: 5s, 3m, 2h, 4d.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// SGR styles.
const (
	bold    = "1"
	dim     = "2"
	reverse = "7"
	red     = "31"
	green   = "32"
)

// style wraps s in an SGR sequence. Reverse video marks the selection even
// under NO_COLOR (it is not a colour; the selection must show).
func (m *model) style(sgr, s string) string {
	if m.o.NoColor && sgr != reverse {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[0m"
}

// colour gives a row the colour of its state.
func (m *model) colour(s sandbox.Status, line string) string {
	switch {
	case s.Forecast.Conflicts() || s.Verdict == "failed" || (s.ExitCode != nil && *s.ExitCode != 0):
		return m.style(red, line)
	case s.State == sandbox.StateRunning:
		return m.style(green, line)
	case s.Verdict == "passed":
		return m.style(green, line)
	}
	return line
}

// NoColor reports whether NO_COLOR asks for no colour.
func NoColor() bool { return os.Getenv("NO_COLOR") != "" }
