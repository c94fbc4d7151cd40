package hooks

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
)

// untouchedRepo fails the test when the hook reaches the repository or the
// engine at all.
type untouchedRepo struct{ t *testing.T }

func (r untouchedRepo) Git() *gitcmd.Runner {
	r.t.Error("the hook read the repository before the image policy refused")
	return &gitcmd.Runner{GitDir: r.t.TempDir()}
}

func (r untouchedRepo) Sandbox(string) (Sandbox, bool, error) {
	r.t.Error("the hook looked up a sandbox before the image policy refused")
	return nil, false, nil
}

func (r untouchedRepo) PrepareVerify(context.Context, PushRun) (verify.Options, func(), error) {
	r.t.Error("the hook prepared a verify run on an image the user has not allowed")
	return verify.Options{}, func() {}, nil
}

// The pre-push verify runs the image the repository's .sandbox.toml names
// only when the user allowed it, as start does; refused, nothing runs and
// the push stops.
func TestVerifyPushedRefusesTheRepositorysImage(t *testing.T) {
	cfg := &config.Loaded{}
	cfg.Verify, cfg.Image, cfg.RepoImage = "make test", "corp/baked:latest", "corp/baked:latest"
	var out bytes.Buffer
	o := VerifyOptions{Config: cfg, UI: ui.New(&out, ui.Options{})}
	updates := []Update{{LocalRef: "refs/heads/main", LocalSHA: strings.Repeat("a", 40), RemoteRef: "refs/heads/main", RemoteSHA: strings.Repeat("0", 40)}}
	refused, err := VerifyPushed(context.Background(), untouchedRepo{t}, updates, o)
	if err == nil || len(refused) != 0 {
		t.Fatalf("VerifyPushed = %v, %v; want the policy's error", refused, err)
	}
	ue, ok := usererr.As(err)
	if !ok || ue.Code != usererr.ExitRefused {
		t.Fatalf("not a refusal: %#v", err)
	}
	said := ue.Msg + strings.Join(ue.Hints, "\n")
	for _, want := range []string{"the pushed commits were not verified", "corp/baked:latest from .sandbox.toml", "allowed_images", "git push --no-verify"} {
		if !strings.Contains(said, want) {
			t.Errorf("the refusal does not say %q: %s", want, said)
		}
	}
	if strings.Contains(out.String(), "verifying") {
		t.Errorf("the hook said it was verifying: %s", out.String())
	}
}
