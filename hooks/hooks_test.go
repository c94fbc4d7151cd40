package hooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseUpdates(t *testing.T) {
	in := "refs/heads/main 1111111111111111111111111111111111111111 refs/heads/main 2222222222222222222222222222222222222222\n" +
		"(delete) 0000000000000000000000000000000000000000 refs/heads/old 3333333333333333333333333333333333333333\n\n"
	got, err := ParseUpdates(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].LocalRef != "refs/heads/main" || got[0].Deletes() || !got[1].Deletes() {
		t.Errorf("ParseUpdates = %+v", got)
	}
	if _, err := ParseUpdates(strings.NewReader("garbage\n")); err == nil {
		t.Error("a malformed line was accepted")
	}
}

func TestInstallChainsAndUninstallRestores(t *testing.T) {
	dir := t.TempDir()
	mine := []byte("#!/bin/sh\necho mine\n")
	if err := os.WriteFile(filepath.Join(dir, "pre-push"), mine, 0o750); err != nil {
		t.Fatal(err)
	}
	st, err := Install(dir, false)
	if err != nil || !st.Installed || !st.Chained {
		t.Fatalf("Install = %+v, %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, Chained)); string(b) != string(mine) {
		t.Errorf("chained hook = %q", b)
	}
	if st, err := Install(dir, false); err != nil || !st.Installed {
		t.Errorf("second Install = %+v, %v", st, err)
	}
	if err := Uninstall(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "pre-push"))
	b, _ := os.ReadFile(filepath.Join(dir, "pre-push"))
	if err != nil || string(b) != string(mine) || fi.Mode().Perm() != 0o750 {
		t.Errorf("restored hook = %q mode %v, %v", b, fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, Chained)); !os.IsNotExist(err) {
		t.Error("chained copy left")
	}
	if err := Uninstall(dir); err == nil {
		t.Error("uninstalling twice succeeded")
	}
}

func TestInstallWithoutExistingHook(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hooks")
	st, err := Install(dir, false)
	if err != nil || !st.Installed || st.Chained {
		t.Fatalf("Install = %+v, %v", st, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "pre-push"))
	if fi.Mode().Perm()&0o100 == 0 {
		t.Error("hook is not executable")
	}
	if err := Uninstall(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestInstallRefusesLeftoverChained(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pre-push"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, Chained), []byte("#!/bin/sh\nold\n"), 0o755)
	if _, err := Install(dir, false); err == nil {
		t.Fatal("Install over a leftover chained hook succeeded without --force")
	}
	if _, err := Install(dir, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, Chained)); string(b) != "#!/bin/sh\n" {
		t.Errorf("--force kept the wrong hook: %q", b)
	}
}

func TestRefusalError(t *testing.T) {
	if RefusalError(nil) != nil {
		t.Error("no refusals must be no error")
	}
	err := RefusalError([]Refusal{{Ref: "refs/sandbox/x/rescue", Reason: "never", Hint: "h"}, {Ref: "refs/heads/\x1b[2J", Reason: "r"}})
	if !strings.Contains(err.Error(), "refs/sandbox/x/rescue: never") || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("RefusalError = %q", err)
	}
}
