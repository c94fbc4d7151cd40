package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// devBuildEnv is a test env whose engine builds images, on a repository
// whose devcontainer builds a Dockerfile FROM the user's base_image.
func devBuildEnv(t *testing.T, mode container.NetworkMode, dockerfile string) (*testEnv, *enginefake.Builder) {
	te := newTestEnv(t)
	te.fake = enginefake.New(config.DefaultImage(), "base:1")
	te.fake.MovesImages = true // the proxy's image is loaded, as on Docker
	te.fake.Output = "git sandbox: " + network.ProxyReadyText + " [::]:3128\n"
	te.write(".devcontainer/devcontainer.json", `{"build": {"dockerfile": "Dockerfile"}}`)
	te.write(".devcontainer/Dockerfile", dockerfile)
	te.git("add", "-A")
	te.git("commit", "-q", "-m", "devcontainer")
	te.reopen()
	b := te.fake.WithBuild()
	te.env.Engines = ConnectorFunc(func(context.Context, string) (Engine, error) { return b, nil })
	te.env.Config.BaseImage = "base:1"
	te.env.Config.Network = mode
	return te, b
}

// Every image the devcontainer's Dockerfile names goes through the user's
// policy before anything is built or made: refused, it is named with its
// file and line and the setting; nothing is built; dry runs warn. The
// user's base_image is allowed without a word, as for .sandbox.toml.
func TestStartDevcontainerImagesNeedTheUsersAllowance(t *testing.T) {
	te, _ := devBuildEnv(t, container.NetworkNone, "FROM base:1\nCOPY --from=secret:1 /key /key\n")
	_, err := te.env.Start(context.Background(), detached("t1"))
	if err == nil || !strings.Contains(err.Error(), "secret:1 from .devcontainer/Dockerfile line 2 (COPY --from)") {
		t.Fatalf("start = %v", err)
	}
	if strings.Contains(err.Error(), "base:1") {
		t.Errorf("the user's base_image was refused: %v", err)
	}
	if n := len(te.fake.Builds()); n != 0 {
		t.Errorf("%d builds before the policy said yes", n)
	}
	te.assertNothingLeft("t1", false)
	o := detached("t1")
	o.DryRun = true
	if _, err := te.env.Start(context.Background(), o); err != nil || !strings.Contains(te.err.String(), ".devcontainer/Dockerfile line 2 (COPY --from) names the image secret:1, which you have not allowed") {
		t.Errorf("dry run: %v\n%s", err, te.err.String())
	}
	te.env.Config.AllowedImages = []string{"docker.io/library/secret:1"}
	te.start("t2")
	if n := len(te.fake.Builds()); n != 3 {
		t.Errorf("%d builds once allowed, want base, layer and labels", n)
	}
}

// The build runs on the sandbox's network: none; in allowlist mode its
// internal network, made with the proxy running (from git sandbox's own
// image, never the one being built) before the build, with HTTP_PROXY pointing there; in open mode its own
// network. create then makes no second network or proxy.
func TestStartDevcontainerBuildRunsUnderTheSandboxsNetwork(t *testing.T) {
	for _, mode := range []container.NetworkMode{container.NetworkNone, container.NetworkAllowlist, container.NetworkOpen} {
		t.Run(string(mode), func(t *testing.T) {
			te, b := devBuildEnv(t, mode, "FROM base:1\nRUN make\n")
			var seen []string
			b.OnBuild = func(o container.ContextBuild) error {
				nets, _ := te.fake.ListNetworks(context.Background(), container.LabelBranch+"=t1")
				names := map[string]bool{}
				for _, n := range nets {
					names[n.Name] = true
				}
				if o.Network != "none" && !names[o.Network] {
					t.Errorf("build on %q, which is not one of the sandbox's networks %v", o.Network, names)
				}
				if mode == container.NetworkAllowlist {
					proxies := te.role("t1", container.RoleProxy)
					if len(proxies) != 1 || proxies[0].Status != enginefake.StatusRunning || proxies[0].Spec.Image != testProxyBinary.Tag() {
						t.Errorf("proxy at build time: %+v", proxies)
					}
					// The label-only step runs nothing and has no arguments;
					// the rest reach the proxy at its address.
					var at []string
					for _, a := range proxies[0].Addrs {
						at = append(at, "http://"+net.JoinHostPort(a.String(), network.ProxyPort))
					}
					if o.Labels == nil && (len(at) != 1 || o.Args["HTTP_PROXY"] != at[0]) || o.Args["https_proxy"] != o.Args["HTTP_PROXY"] {
						t.Errorf("build args %v, want the proxy at %v", o.Args, at)
					}
				}
				seen = append(seen, o.Network)
				return nil
			}
			sb := te.start("t1")
			want := map[container.NetworkMode]string{container.NetworkNone: "none", container.NetworkAllowlist: sb.Spec.NetworkName, container.NetworkOpen: sb.Spec.NetworkName}[mode]
			if len(seen) != 3 || seen[0] != want || seen[1] != want || seen[2] != want || want == "" {
				t.Errorf("builds ran on %v, want %q", seen, want)
			}
			nets, _ := te.fake.ListNetworks(context.Background(), container.LabelBranch+"=t1")
			if mode != container.NetworkNone && len(nets) != 1 || mode == container.NetworkNone && len(nets) != 0 {
				t.Errorf("networks %+v", nets)
			}
			if proxies := te.role("t1", container.RoleProxy); mode == container.NetworkAllowlist && (len(proxies) != 1 || proxies[0].Spec.Image != testProxyBinary.Tag()) {
				t.Errorf("proxies after the build %+v: want one, of git sandbox's own image, not the one built", proxies)
			}
		})
	}
}

// A build that fails leaves nothing of what was made for it (networks,
// proxy, state directory), and its error names the hosts the proxy denied
// meanwhile, with --allow; a later step of create that fails removes the
// networks made for the build too.
func TestStartDevcontainerBuildFailureLeavesNothing(t *testing.T) {
	te, b := devBuildEnv(t, container.NetworkAllowlist, "FROM base:1\nRUN curl https://deb.example.org/x\n")
	b.OnBuild = func(o container.ContextBuild) error {
		log := filepath.Join(te.env.Layout.NetLogDir("t1"), network.ProxyLogFile)
		rec, _ := json.Marshal(egress.Record{Time: time.Now(), Kind: "connect", Host: "deb.example.org", Port: 443, Decision: egress.Denied, Reason: "not in the allow list"})
		if err := os.WriteFile(log, append(rec, '\n'), 0o600); err != nil {
			t.Error(err)
		}
		return errors.New("The command '/bin/sh -c curl' returned a non-zero code: 6")
	}
	_, err := te.env.Start(context.Background(), detached("t1"))
	if err == nil || !strings.Contains(err.Error(), "denied the build deb.example.org:443 (not in the allow list)") {
		t.Fatalf("start = %v", err)
	}
	if ue, _ := usererr.As(err); ue == nil || !strings.Contains(strings.Join(ue.Hints, "\n"), "--allow deb.example.org") {
		t.Errorf("hints %+v", ue)
	}
	te.assertNothingLeft("t1", false)
	if n := len(te.role("t1", container.RoleProxy)); n != 0 {
		t.Errorf("%d proxies left", n)
	}

	b.OnBuild = nil
	te.env.Faults = failAt{"container", errors.New("injected failure at container")}
	if _, err := te.env.Start(context.Background(), detached("t2")); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("start = %v", err)
	}
	te.assertNothingLeft("t2", false)
}
