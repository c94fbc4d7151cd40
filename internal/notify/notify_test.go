package notify

import (
	"errors"
	"reflect"
	"testing"
)

func TestPlan(t *testing.T) {
	one := 1
	found := func(string) (string, error) { return "/usr/bin/notify-send", nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	n := Notification{Sandbox: "fix/\x1b[2Jlogin", Repo: "/src/app", Event: VerifyFailed, ExitCode: &one}
	for _, tc := range []struct {
		name     string
		setting  string
		look     func(string) (string, error)
		wantArgv []string
		wantEnv  []string
		wantErr  error
	}{
		{name: "off", setting: "", look: found},
		{name: "desktop", setting: "desktop", look: found,
			wantArgv: []string{"/usr/bin/notify-send", "--app-name=git sandbox", `git sandbox: fix/\x1b[2Jlogin`, "verify failed (exit code 1)"},
			wantEnv:  []string{"PATH=/bin", "EVENT=stale"}},
		{name: "desktop without notify-send", setting: "desktop", look: missing, wantErr: ErrNoDesktop},
		{name: "command", setting: `echo "$SANDBOX $EVENT" >> log`, look: missing,
			wantArgv: []string{"sh", "-c", `echo "$SANDBOX $EVENT" >> log`},
			wantEnv:  []string{"PATH=/bin", "SANDBOX=fix/\x1b[2Jlogin", "EVENT=verify-failed", "EXIT_CODE=1", "SANDBOX_REPO=/src/app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, env, err := Plan(tc.setting, n, []string{"PATH=/bin", "EVENT=stale"}, tc.look)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(argv, tc.wantArgv) {
				t.Errorf("argv %q, want %q", argv, tc.wantArgv)
			}
			if !reflect.DeepEqual(env, tc.wantEnv) {
				t.Errorf("env %q, want %q", env, tc.wantEnv)
			}
		})
	}
}

func TestMessageWithoutCode(t *testing.T) {
	if got := Message(Notification{Event: Exited}); got != "the agent exited" {
		t.Errorf("got %q", got)
	}
}
