// Command git-sandbox hands a task to an AI coding agent running in a Docker
// container on its own linked git worktree, and lands the result as one
// reviewed commit. Installed on PATH, git runs it as `git sandbox`.
package main

import (
	"os"

	"github.com/git-sandbox/git-sandbox/internal/startgc"
)

func main() {
	startgc.ResumeAfter(startgc.Grace)
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
