package main

import (
	"fmt"
	"io"
	"slices"
)

// shortUsage is what git sandbox alone and git sandbox help print: the
// commands of a day's work, and where the rest is.
const shortUsage = `usage: git sandbox <command> [<args>]

Hand a task to an AI coding agent in a container on its own git worktree,
then land its work as one reviewed commit.

  start BRANCH -p TASK    start an agent on a new branch (-d: in the background)
  ps                      this repository's sandboxes (--all-repos: every one's)
  logs BRANCH [-f]        what the agent printed; attach BRANCH to talk to it
  diff BRANCH             exactly what land would apply
  land BRANCH             one commit on the base branch; the sandbox goes
  stop BRANCH, rm BRANCH  stop the agent; remove the sandbox
  rescue list             every snapshot of the agents' work

git sandbox --help lists every command; git sandbox help COMMAND (or
COMMAND --help) tells about one; git sandbox doctor checks the set-up.
`

// helpArgs handles the command lines kong has no command for: none at all
// (the short usage, exit status 1, as git alone does), help (the short
// usage, 0) and help COMMAND… (that command's --help). done says the
// command line was answered here with that exit status; otherwise args
// are what to parse.
func helpArgs(args []string, stdout io.Writer) (rest []string, code int, done bool) {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, shortUsage)
		return nil, 1, true
	case args[0] != "help":
		return args, 0, false
	case len(args) == 1:
		fmt.Fprint(stdout, shortUsage)
		return nil, 0, true
	}
	return append(slices.Clone(args[1:]), "--help"), 0, false
}
