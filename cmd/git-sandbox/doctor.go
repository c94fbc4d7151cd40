package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/kube"
	"github.com/git-sandbox/git-sandbox/internal/notify"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// DoctorCmd is git sandbox doctor.
type DoctorCmd struct{}

// Help is doctor's long help.
func (c *DoctorCmd) Help() string {
	return `Checks everything git sandbox needs and says how to fix what is missing: git
2.38 or newer, this repository, the Docker daemon and its API version, the
image and which agent CLIs it has, the configuration, the state directory,
every engine of your config (asked at once: it answers, its mode, whether it
has the image), and each agent's login.`
}

// Run runs the checks.
func (c *DoctorCmd) Run(app *App) error {
	failed := 0
	check := func(ok bool, what, detail, hint string) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(app.Stdout, "%s %s", mark, what)
		if detail != "" {
			fmt.Fprintf(app.Stdout, ": %s", detail)
		}
		fmt.Fprintln(app.Stdout)
		if !ok && hint != "" {
			fmt.Fprintf(app.Stdout, "     hint: %s\n", hint)
		}
	}

	gv, err := gitcmd.GitVersion(app.Ctx)
	gitDetail := gv.Text
	if err != nil {
		gitDetail = errText(err)
	}
	check(err == nil && gv.AtLeast(2, 38), "git", gitDetail, "install git 2.38 or newer (merge-tree --write-tree is needed to land)")

	cfg, err := config.Load("")
	check(err == nil, "user config", orNone(cfgFile(cfg), config.UserPath()), errText(err))
	if cfg == nil {
		cfg = &config.Loaded{Config: config.Defaults()}
	}
	if cfg.Notify == notify.Desktop {
		_, err := proc.LookPath("notify-send")
		check(err == nil, "notify", "desktop notifications through notify-send", "install notify-send (libnotify), or set notify to a command of your own")
	}

	env, err := app.Env()
	if err == nil {
		check(true, "repository", env.Repo.MainWorkTree+" (id "+env.Repo.ID+")", "")
		cfg = env.Config
	} else {
		check(false, "repository", errText(err), "run git sandbox doctor inside a git checkout")
	}

	root, err := worktree.StateRoot()
	if err == nil {
		err = os.MkdirAll(root, 0o700)
	}
	check(err == nil, "state directory", root, errText(err))

	d, err := container.Connect(app.Ctx)
	if err != nil {
		check(false, "docker", errText(err), "start Docker, or point DOCKER_HOST at a running daemon")
	} else {
		defer d.Close()
		sv, _ := d.ServerVersion(app.Ctx)
		check(true, "docker", "engine "+sv+", API "+d.APIVersion(), "")
		ok, err := d.ImageExists(app.Ctx, cfg.Image)
		hint := "git sandbox image build (add --base IMAGE to build offline from a local image)"
		if cfg.Image != config.DefaultImage() {
			hint = "build or pull " + cfg.Image
		}
		detail := cfg.Image
		if err != nil {
			detail = errText(err)
		} else if !ok && cfg.Image == config.DefaultImage() {
			detail += " is missing (start builds it from " + cfg.BaseImage + ")"
		}
		check(err == nil && (ok || cfg.Image == config.DefaultImage()), "image", detail, hint)
		if err == nil && ok {
			imageAgentLines(app, d, cfg.Image, cfg.Agent)
		}
		if env != nil {
			cacheLines(app, env)
			warmLines(app, d, env)
		}
	}

	engineLines(app, cfg, check)

	for _, name := range agent.Names() {
		a, _ := agent.Get(name)
		paths := a.LoginPaths()
		if len(paths) == 0 {
			continue
		}
		// The shared store (agent_home = "per-repo" keeps one per
		// repository next to it); before its first use, the old shared home.
		home := worktree.Layout{Root: root}.Logins(name, "")
		if _, err := os.Stat(home); err != nil {
			home = worktree.Layout{Root: root}.AgentHome(name)
		}
		found := ""
		for _, p := range paths {
			if _, err := os.Stat(filepath.Join(home, p)); err == nil {
				found = p
			}
		}
		if found != "" {
			fmt.Fprintf(app.Stdout, "ok   %s login: %s\n", name, filepath.Join(home, found))
		} else {
			fmt.Fprintf(app.Stdout, "info %s: not logged in yet (log in once inside a sandbox; it persists in %s)\n", name, home)
		}
	}
	if failed > 0 {
		return usererr.New("%d check(s) failed", failed).Hint("fix the FAIL lines above")
	}
	return nil
}

// imageAgentLines says, per agent that needs a CLI, whether the image has
// it: start refuses an agent the image lacks. A missing CLI is not a
// failure of the setup (the shell agent and the others still work), so it
// is a "warn" line with the way to get it.
func imageAgentLines(app *App, d *container.Docker, image, defaultAgent string) {
	have, err := d.ImageAgents(app.Ctx, image)
	if err != nil {
		fmt.Fprintf(app.Stdout, "info agent CLIs: cannot tell which %s has: %s\n", termsafe.String(image), errText(err))
		return
	}
	for _, name := range agent.Installable() {
		if slices.Contains(have, name) {
			fmt.Fprintf(app.Stdout, "ok   %s CLI: in %s\n", name, termsafe.String(image))
			continue
		}
		note := ""
		if name == defaultAgent {
			note = ", the default agent"
		}
		fmt.Fprintf(app.Stdout, "warn %s CLI: not in %s (start --agent %s refuses%s)\n", name, termsafe.String(image), name, note)
		hint := "build it with network access so npm can install it"
		if image == config.DefaultImage() {
			hint = "rebuild it with network access so npm can install it: git sandbox image build"
		}
		fmt.Fprintf(app.Stdout, "     hint: %s\n", hint)
	}
}

// cacheLines lists the repository's caches: each configured one with its
// volume (or that the next start makes it), and volumes left from caches no
// longer configured.
func cacheLines(app *App, env *sandbox.Env) {
	have, err := env.Caches(app.Ctx)
	if err != nil {
		fmt.Fprintf(app.Stdout, "info caches: %s\n", errText(err))
		return
	}
	byVolume := map[string]bool{}
	for _, c := range have {
		byVolume[c.Volume] = true
	}
	configured := map[string]bool{}
	for _, c := range env.Config.Caches {
		t := path.Clean(c.Target)
		v := container.CacheVolume(env.Repo.ID, t)
		configured[v] = true
		if byVolume[v] {
			fmt.Fprintf(app.Stdout, "ok   cache %s: volume %s\n", termsafe.String(t), v)
		} else {
			fmt.Fprintf(app.Stdout, "info cache %s: no volume yet (the next start makes it)\n", termsafe.String(t))
		}
	}
	for _, c := range env.Config.RepoCaches {
		t := path.Clean(c.Target)
		v := container.RepoCacheVolume(env.Repo.ID, c.Name)
		configured[v] = true
		if byVolume[v] {
			fmt.Fprintf(app.Stdout, "ok   cache %s (%s, from %s): volume %s\n", termsafe.String(t), c.Name, config.RepoFile, v)
		} else {
			fmt.Fprintf(app.Stdout, "info cache %s (%s, from %s): no volume yet (the next start makes it)\n", termsafe.String(t), c.Name, config.RepoFile)
		}
	}
	for _, c := range have {
		if !configured[c.Volume] {
			fmt.Fprintf(app.Stdout, "info cache volume %s (%s) is no longer configured\n", c.Volume, termsafe.String(c.Target))
			fmt.Fprintf(app.Stdout, "     hint: git sandbox image prune --caches removes it\n")
		}
	}
}

// warmLines lists the repository's warm images (setup's kept results),
// newest first.
func warmLines(app *App, d *container.Docker, env *sandbox.Env) {
	imgs, err := d.ListImages(app.Ctx, sandbox.LabelWarm+"=1", sandbox.LabelWarmRepo+"="+env.Repo.ID)
	if err != nil {
		fmt.Fprintf(app.Stdout, "info warm images: %s\n", errText(err))
		return
	}
	slices.SortFunc(imgs, func(a, b container.Image) int { return b.Created.Compare(a.Created) })
	for i, img := range imgs {
		fmt.Fprintf(app.Stdout, "info warm image %s (setup's result, made %s)\n", termsafe.String(warmName(img)), img.Created.Local().Format("2006-01-02 15:04"))
		if i == 1 {
			fmt.Fprintf(app.Stdout, "     hint: git sandbox image prune removes all but the newest\n")
		}
	}
}

func cfgFile(c *config.Loaded) string {
	if c == nil {
		return ""
	}
	return c.UserFile
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// engineLines checks every engine of the user's config, all at once: it
// answers, its mode, and whether it has the sandbox image.
func engineLines(app *App, cfg *config.Loaded, check func(ok bool, what, detail, hint string)) {
	type result struct {
		ok           bool
		detail, hint string
	}
	out := make([]result, len(cfg.Engines))
	var wg sync.WaitGroup
	for i, e := range cfg.Engines {
		wg.Add(1)
		go func(i int, e config.Engine) {
			defer wg.Done()
			if e.IsKubernetes() {
				out[i] = kubeLine(app, &e)
				return
			}
			d, err := container.ConnectTo(app.Ctx, container.Endpoint{Name: e.Name, Host: e.Host, CertPath: e.CertPath, Context: e.Context})
			if err != nil {
				out[i] = result{detail: "unreachable: " + errText(err), hint: "start its daemon, or fix host/context of [[engine]] " + e.Name + " in " + config.UserPath()}
				return
			}
			defer d.Close()
			sv, _ := d.ServerVersion(app.Ctx)
			mode := "bind mounts"
			if e.CopyMode() {
				mode = "copy mode"
			}
			detail := fmt.Sprintf("engine %s, API %s, %s", sv, d.APIVersion(), mode)
			ok, err := d.ImageExists(app.Ctx, cfg.Image)
			switch {
			case err != nil:
				out[i] = result{detail: detail + "; image: " + errText(err)}
				return
			case !ok:
				detail += "; " + cfg.Image + " is missing there"
			}
			out[i] = result{ok: true, detail: detail}
		}(i, e)
	}
	wg.Wait()
	for i, e := range cfg.Engines {
		check(out[i].ok, "engine "+termsafe.String(e.Name), out[i].detail, out[i].hint)
	}
}

// kubeLine checks a Kubernetes engine: the cluster answers and the
// namespace's objects can be read.
func kubeLine(app *App, e *config.Engine) (r struct {
	ok           bool
	detail, hint string
}) {
	k, err := kube.Connect(app.Ctx, kube.OptionsOf(e))
	if err != nil {
		r.detail = "unreachable: " + errText(err)
		r.hint = "check the cluster (kubectl version), or kubeconfig/context of [[engine]] " + e.Name + " in " + config.UserPath()
		return r
	}
	defer k.Close()
	detail, err := k.Check(app.Ctx)
	if err != nil {
		r.detail = errText(err)
		r.hint = "the engine needs to create Pods, ConfigMaps, PersistentVolumeClaims and NetworkPolicies in namespace " + k.Namespace()
		return r
	}
	r.ok, r.detail = true, detail+", copy mode (NetworkPolicy needs a network plugin that enforces it)"
	return r
}
