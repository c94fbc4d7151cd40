package enginetest

import (
	"bytes"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// testLifecycle: create, inspect, remove, and the kinds of the errors of
// a missing container, a name in use and a container that does not run.
func testLifecycle(x *env) {
	s := x.spec("life", Program{})
	id := x.create(s)
	st := x.inspect(id)
	if st.Status != "created" || st.Running || st.Paused || st.Name != s.Name || st.Labels[container.LabelRepo] != x.tag || st.ID != id {
		x.Errorf("a created container: %+v", st)
	}
	if _, err := x.e.Create(x.ctx, x.spec("life", Program{})); !container.IsConflict(err) {
		x.Errorf("create with a name in use = %v, want ErrConflict", err)
	}
	missing := x.name("missing")
	if _, err := x.e.Inspect(x.ctx, missing); !container.IsNotFound(err) {
		x.Errorf("inspect of a missing container = %v, want ErrNotFound", err)
	}
	if err := x.e.Start(x.ctx, missing); !container.IsNotFound(err) {
		x.Errorf("start of a missing container = %v, want ErrNotFound", err)
	}
	if err := x.e.Kill(x.ctx, missing, "SIGKILL"); !container.IsNotFound(err) {
		x.Errorf("kill of a missing container = %v, want ErrNotFound", err)
	}
	if err := x.e.Pause(x.ctx, id); !container.IsConflict(err) {
		x.Errorf("pause of a created container = %v, want ErrConflict", err)
	}
	if _, err := x.e.Exec(x.ctx, id, container.ExecOptions{Argv: Program{}.Argv()}); !container.IsConflict(err) {
		x.Errorf("exec in a created container = %v, want ErrConflict", err)
	}
	if err := x.e.Stop(x.ctx, id, time.Second); err != nil {
		x.Errorf("stop of a container that does not run: %v", err)
	}
	if err := x.e.Stop(x.ctx, missing, time.Second); err != nil {
		x.Errorf("stop of a missing container: %v", err)
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Fatalf("remove: %v", err)
	}
	if _, err := x.e.Inspect(x.ctx, id); !container.IsNotFound(err) {
		x.Errorf("inspect of a removed container = %v, want ErrNotFound", err)
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Errorf("removing a missing container: %v", err)
	}
}

// testStartAndWait: a container's exit code reaches both wait conditions,
// Inspect and List, and a container that ended starts again.
func testStartAndWait(x *env) {
	id := x.create(x.spec("wait", Program{Stdout: "out\n", Code: 3}))
	if res := x.runToEnd(id); res.Err != nil || res.Code != 3 {
		x.Fatalf("wait for the next exit = %+v, want code 3", res)
	}
	if res := <-x.e.WaitExit(x.ctx, id, container.WaitNotRunning); res.Err != nil || res.Code != 3 {
		x.Errorf("wait on an ended container = %+v, want code 3 at once", res)
	}
	if st := x.inspect(id); st.Status != "exited" || st.Running || st.ExitCode != 3 {
		x.Errorf("an ended container: %+v", st)
	}
	list, err := x.e.List(x.ctx, x.label)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Status != "exited" || list[0].ListExitCode == nil || *list[0].ListExitCode != 3 {
		x.Errorf("list of an ended container = %+v, %v", list, err)
	}
	if res := x.runToEnd(id); res.Err != nil || res.Code != 3 {
		x.Errorf("a second run = %+v, want code 3", res)
	}
}

// testRun: container.Run runs a container to its end and leaves nothing.
func testRun(x *env) {
	res, err := container.Run(x.ctx, x.e, x.spec("run", Program{Code: 2}), container.RunOptions{})
	if err != nil || res.Err != nil || res.Code != 2 {
		x.Errorf("run = %+v, %v; want code 2", res, err)
	}
	if list, err := x.e.List(x.ctx, x.label); err != nil || len(list) != 0 {
		x.Errorf("left after run: %+v %v", list, err)
	}
}

// testListByLabels: List returns the managed containers carrying every
// label given (key=value, or key alone), and no other.
func testListByLabels(x *env) {
	const key = "git-sandbox.suite"
	made := map[string]string{}
	for _, which := range []string{"a", "b"} {
		s := x.spec("list-"+which, Program{})
		s.Labels[key] = which
		made[which] = x.create(s)
	}
	other := x.spec("list-other", Program{})
	delete(other.Labels, container.LabelRepo)
	oid := x.create(other)
	x.Cleanup(func() { _ = x.e.Remove(x.ctx, oid) })
	for _, tc := range []struct {
		labels []string
		want   []string
	}{
		{[]string{x.label}, []string{"a", "b"}},
		{[]string{x.label, key + "=a"}, []string{"a"}},
		{[]string{x.label, key}, []string{"a", "b"}},
		{[]string{x.label, key + "=c"}, nil},
	} {
		list, err := x.e.List(x.ctx, tc.labels...)
		if err != nil {
			x.Fatalf("list %v: %v", tc.labels, err)
		}
		got := ids(list)
		if len(got) != len(tc.want) {
			x.Errorf("list %v = %+v, want %v", tc.labels, list, tc.want)
		}
		for _, w := range tc.want {
			if !got[made[w]] {
				x.Errorf("list %v lacks %s: %+v", tc.labels, w, list)
			}
		}
		for _, st := range list {
			if st.Name == "" || st.Labels[container.LabelRepo] != x.tag {
				x.Errorf("listed %+v", st)
			}
		}
	}
}

// testStopAndKill: Stop and Kill end a running container; Kill of one
// that does not run is ErrConflict.
func testStopAndKill(x *env) {
	x.need(Signals)
	id := x.started("stop")
	if st := x.inspect(id); !st.Running || st.Status != "running" {
		x.Fatalf("a started container: %+v", st)
	}
	if err := x.e.Stop(x.ctx, id, 10*time.Second); err != nil {
		x.Fatalf("stop: %v", err)
	}
	if st := x.inspect(id); st.Running || st.Status != "exited" {
		x.Errorf("a stopped container: %+v", st)
	}
	if err := x.e.Kill(x.ctx, id, "SIGKILL"); !container.IsConflict(err) {
		x.Errorf("kill of a stopped container = %v, want ErrConflict", err)
	}
	waitC := x.e.WaitExit(x.ctx, id, container.WaitNextExit)
	if err := x.e.Start(x.ctx, id); err != nil {
		x.Fatalf("start again: %v", err)
	}
	if err := x.e.Kill(x.ctx, id, "SIGKILL"); err != nil {
		x.Fatalf("kill: %v", err)
	}
	if res := <-waitC; res.Err != nil || res.Code == 0 {
		x.Errorf("a killed container's exit = %+v, want a code", res)
	}
}

// testPauseAndUnpause: pause freezes a running container; a second pause
// is ErrConflict, and an unpause of a container that is not paused an
// error (Docker's is of no kind).
func testPauseAndUnpause(x *env) {
	x.need(Pause)
	id := x.started("pause")
	if err := x.e.Pause(x.ctx, id); err != nil {
		x.Fatalf("pause: %v", err)
	}
	if st := x.inspect(id); !st.Paused || !st.Running || st.Status != "paused" {
		x.Errorf("inspect of a paused container: %+v", st)
	}
	if list, err := x.e.List(x.ctx, x.label); err != nil || len(list) != 1 || list[0].Running || list[0].Status != "paused" {
		x.Errorf("list of a paused container (listed as not running) = %+v, %v", list, err)
	}
	if err := x.e.Pause(x.ctx, id); !container.IsConflict(err) {
		x.Errorf("second pause = %v, want ErrConflict", err)
	}
	if err := x.e.Unpause(x.ctx, id); err != nil {
		x.Fatalf("unpause: %v", err)
	}
	if st := x.inspect(id); st.Paused || !st.Running || st.Status != "running" {
		x.Errorf("inspect of a thawed container: %+v", st)
	}
	if err := x.e.Unpause(x.ctx, id); err == nil {
		x.Errorf("unpause of a running container succeeded")
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Errorf("remove of a running container: %v", err)
	}
}

// testExec: a command in a running container gets its stdin, working
// directory and environment, and its output and exit code come back.
func testExec(x *env) {
	x.need(Exec)
	id := x.started("exec")
	var out, errOut bytes.Buffer
	started := false
	code, err := x.e.Exec(x.ctx, id, container.ExecOptions{
		Argv:    Program{Echo: true, PrintDir: true, Stdout: "!", Stderr: "e", Code: 5}.Argv(),
		WorkDir: "/tmp", Env: []string{EnvVar + "=env"},
		Streams: container.Streams{Stdin: strings.NewReader("ping"), Stdout: &out, Stderr: &errOut},
		Started: func() { started = true },
	})
	if err != nil || code != 5 || out.String() != "ping/tmp:env!" || !started {
		x.Errorf("exec = %d, %v, stdout %q, started %v; want 5, ping/tmp:env!", code, err, out.String(), started)
	}
	if !strings.Contains(out.String()+errOut.String(), "e") {
		x.Errorf("exec's stderr is lost: %q %q", out.String(), errOut.String())
	}
	out.Reset()
	code, err = x.e.Exec(x.ctx, id, container.ExecOptions{Argv: Program{Stdout: "x"}.Argv(), Streams: container.Streams{Stdout: &out}})
	if err != nil || code != 0 || out.String() != "x" {
		x.Errorf("exec without stdin = %d, %v, %q", code, err, out.String())
	}
	if _, err := x.e.Exec(x.ctx, x.name("missing"), container.ExecOptions{Argv: Program{}.Argv()}); !container.IsNotFound(err) {
		x.Errorf("exec in a missing container = %v, want ErrNotFound", err)
	}
}

// testAttach: a container's main process reads what Attach sends, and what
// it prints comes back, through container.Run.
func testAttach(x *env) {
	x.need(Attach)
	s := x.spec("attach", Program{Echo: true, Stdout: "!", Code: 4})
	s.OpenStdin, s.StdinOnce = true, true
	var out bytes.Buffer
	res, err := container.Run(x.ctx, x.e, s, container.RunOptions{Streams: container.Streams{Stdin: strings.NewReader("hello"), Stdout: &out}})
	if err != nil || res.Err != nil || res.Code != 4 || out.String() != "hello!" {
		x.Errorf("attached run = %+v, %v, stdout %q; want code 4, hello!", res, err, out.String())
	}
}

// testLogs: what a container printed is read back after it ended (stderr
// in Stderr, or with stdout for an engine that keeps one stream).
func testLogs(x *env) {
	x.need(Logs)
	id := x.create(x.spec("logs", Program{Stdout: "out\n", Stderr: "err\n"}))
	if res := x.runToEnd(id); res.Err != nil || res.Code != 0 {
		x.Fatalf("run = %+v", res)
	}
	var out, errOut bytes.Buffer
	if err := x.e.Logs(x.ctx, id, container.LogsOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		x.Fatalf("logs: %v", err)
	}
	if !strings.Contains(out.String(), "out\n") || !strings.Contains(out.String()+errOut.String(), "err\n") || strings.Contains(errOut.String(), "out") {
		x.Errorf("logs: stdout %q, stderr %q", out.String(), errOut.String())
	}
}
