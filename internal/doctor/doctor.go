// Package doctor checks everything git sandbox needs, line by line,
// and says how to fix what is missing; the doctor command prints its
// report.
package doctor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/kube"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/fswatch"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/mcp"
	"github.com/git-sandbox/git-sandbox/internal/notify"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/recovery"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/toolchain"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Doctor runs the checks, writing a line for each to Out.
type Doctor struct {
	Ctx context.Context
	Out io.Writer
	// ProxyBinary is this binary as the egress proxy runs it, given the
	// state directory (its cache).
	ProxyBinary func(stateRoot string) (proxyimage.Binary, error)
	// MCPCheck starts git sandbox mcp in a directory and asks it what a
	// client asks first (nil: mcp.Check, this binary's).
	MCPCheck func(ctx context.Context, dir string, stderr io.Writer) (*mcp.Checked, error)
	// Failed counts the FAIL lines.
	Failed int
}

// check writes a check's line: ok or FAIL, and a failure's hint.
func (doc *Doctor) check(ok bool, what, detail, hint string) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		doc.Failed++
	}
	fmt.Fprintf(doc.Out, "%s %s", mark, what)
	if detail != "" {
		fmt.Fprintf(doc.Out, ": %s", detail)
	}
	fmt.Fprintln(doc.Out)
	if !ok && hint != "" {
		fmt.Fprintf(doc.Out, "     hint: %s\n", hint)
	}
}

// Run runs every check: env is the repository's environment, or nil with
// envErr outside one. It returns the number of checks that failed.
func (doc *Doctor) Run(env *sandbox.Env, envErr error) int {
	gv, err := gitcmd.GitVersion(doc.Ctx)
	gitDetail := gv.Text
	if err != nil {
		gitDetail = errText(err)
	}
	doc.check(err == nil && gv.AtLeast(2, 38), "git", gitDetail, "install git 2.38 or newer (merge-tree --write-tree is needed to land)")

	cfg, err := config.Load("")
	doc.check(err == nil, "user config", orNone(cfgFile(cfg), config.UserPath()), errText(err))
	if cfg == nil {
		cfg = &config.Loaded{Config: config.Defaults()}
	}
	if cfg.Notify == notify.Desktop {
		_, err := proc.LookPath("notify-send")
		doc.check(err == nil, "notify", "desktop notifications through notify-send", "install notify-send (libnotify), or set notify to a command of your own")
	}

	if envErr == nil {
		doc.check(true, "repository", env.Repo.MainWorkTree+" (id "+env.Repo.ID+")", "")
		cfg = env.Config
		repairLines(doc, env, doc.check)
	} else {
		doc.check(false, "repository", errText(envErr), "run git sandbox doctor inside a git checkout")
	}

	root, err := worktree.StateRoot()
	if err == nil {
		err = os.MkdirAll(root, 0o700)
	}
	doc.check(err == nil, "state directory", root, errText(err))

	localEngineLines(doc, cfg, env, doc.check)
	if env != nil {
		visibleLine(doc, env)
		watchLines(doc, env)
	}
	proxyLine(doc, cfg, root, doc.check)
	engineLines(doc, cfg, doc.check)
	if env != nil {
		mcpLine(doc, env, doc.check)
	}

	loginLines(doc, root)
	return doc.Failed
}

// mcpLine checks that git sandbox mcp starts in this repository, as a
// client starts it, and answers initialize and tools/list.
func mcpLine(doc *Doctor, env *sandbox.Env, check func(ok bool, what, detail, hint string)) {
	var stderr bytes.Buffer
	mcpCheck := doc.MCPCheck
	if mcpCheck == nil {
		mcpCheck = mcp.Check
	}
	got, err := mcpCheck(doc.Ctx, env.Repo.MainWorkTree, &stderr)
	if err != nil {
		detail := errText(err)
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			detail += ": " + termsafe.String(msg)
		}
		check(false, "mcp", detail, "git sandbox mcp in this repository says what is wrong")
		return
	}
	landing := "sandbox_land answers with the command, landing is yours"
	if env.Config.MCP.AllowLand {
		landing = "landing allowed (mcp.allow_land)"
	}
	check(true, "mcp", fmt.Sprintf("git sandbox mcp answers initialize (%s, %d tools; %s)", got.Server, got.Tools, landing), "")
}

// localEngineLines checks the engine the environment names (where new
// sandboxes go unless the config names another): it answers, it has the
// image and which agent CLIs that has, and the repository's caches and
// warm images on it.
func localEngineLines(doc *Doctor, cfg *config.Loaded, env *sandbox.Env, check func(ok bool, what, detail, hint string)) {
	d, err := engines.Connect(doc.Ctx, cfg, "")
	if err != nil {
		check(false, "docker", errText(err), "start Docker, or point DOCKER_HOST at a running daemon")
		return
	}
	defer d.Close()
	detail, err := d.Check(doc.Ctx)
	if err != nil {
		detail = errText(err)
	}
	check(err == nil, "docker", detail, hintOf(err))
	ok, err := d.Images().Exists(doc.Ctx, cfg.Image)
	hint := "git sandbox image build (add --base IMAGE to build offline from a local image)"
	if cfg.Image != config.DefaultImage() {
		hint = "build or pull " + cfg.Image
	}
	detail = cfg.Image
	if err != nil {
		detail = errText(err)
	} else if !ok && cfg.Image == config.DefaultImage() {
		detail += " is missing (start builds it from " + cfg.BaseImage + ")"
	}
	check(err == nil && (ok || cfg.Image == config.DefaultImage()), "image", detail, hint)
	if err == nil && ok {
		imageAgentLines(doc, d, cfg.Image, cfg.Agent)
	}
	if env != nil {
		cacheLines(doc, env)
		warmLines(doc, d, env)
	}
}

// loginLines says, per agent with a login, whether it is logged in.
func loginLines(doc *Doctor, root string) {
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
			fmt.Fprintf(doc.Out, "ok   %s login: %s\n", name, filepath.Join(home, found))
		} else {
			fmt.Fprintf(doc.Out, "info %s: not logged in yet (log in once inside a sandbox; it persists in %s)\n", name, home)
		}
	}
}

// imageAgentLines says, per agent that needs a CLI, whether the image has
// it: start refuses an agent the image lacks. A missing CLI is not a
// failure of the setup (the shell agent and the others still work), so it
// is a "warn" line with the way to get it.
func imageAgentLines(doc *Doctor, d container.Engine, image, defaultAgent string) {
	have, err := d.Images().Agents(doc.Ctx, image)
	if err != nil {
		fmt.Fprintf(doc.Out, "info agent CLIs: cannot tell which %s has: %s\n", termsafe.String(image), errText(err))
		return
	}
	for _, name := range agent.Installable() {
		if slices.Contains(have, name) {
			fmt.Fprintf(doc.Out, "ok   %s CLI: in %s\n", name, termsafe.String(image))
			continue
		}
		note := ""
		if name == defaultAgent {
			note = ", the default agent"
		}
		fmt.Fprintf(doc.Out, "warn %s CLI: not in %s (start --agent %s refuses%s)\n", name, termsafe.String(image), name, note)
		hint := "build it with network access so npm can install it"
		if image == config.DefaultImage() {
			hint = "rebuild it with network access so npm can install it: git sandbox image build"
		}
		fmt.Fprintf(doc.Out, "     hint: %s\n", hint)
	}
}

// cacheLines lists the repository's caches: each configured one with its
// volume (or that the next start makes it), and volumes left from caches no
// longer configured.
func cacheLines(doc *Doctor, env *sandbox.Env) {
	have, err := env.Caches(doc.Ctx)
	if err != nil {
		fmt.Fprintf(doc.Out, "info caches: %s\n", errText(err))
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
			fmt.Fprintf(doc.Out, "ok   cache %s: volume %s\n", termsafe.String(t), v)
		} else {
			fmt.Fprintf(doc.Out, "info cache %s: no volume yet (the next start makes it)\n", termsafe.String(t))
		}
	}
	for _, c := range env.Config.RepoCaches {
		t := path.Clean(c.Target)
		v := container.RepoCacheVolume(env.Repo.ID, c.Name)
		configured[v] = true
		if byVolume[v] {
			fmt.Fprintf(doc.Out, "ok   cache %s (%s, from %s): volume %s\n", termsafe.String(t), c.Name, config.RepoFile, v)
		} else {
			fmt.Fprintf(doc.Out, "info cache %s (%s, from %s): no volume yet (the next start makes it)\n", termsafe.String(t), c.Name, config.RepoFile)
		}
	}
	for _, c := range have {
		if !configured[c.Volume] {
			fmt.Fprintf(doc.Out, "info cache volume %s (%s) is no longer configured\n", c.Volume, termsafe.String(c.Target))
			fmt.Fprintf(doc.Out, "     hint: git sandbox image prune --caches removes it\n")
		}
	}
}

// visibleLine says what disk the repository's visible store (what agents
// may read) takes, and how much of it is shared with the repository's own
// packs.
func visibleLine(doc *Doctor, env *sandbox.Env) {
	u, err := workspace.VisibleUsage(env.Repo, env.Layout)
	switch {
	case err != nil:
		fmt.Fprintf(doc.Out, "info store agents read: %s\n", errText(err))
	case u.Packs == 0:
		fmt.Fprintf(doc.Out, "info store agents read: not made yet (the first start makes it; git sandbox hooks install makes it ahead)\n")
	default:
		fmt.Fprintf(doc.Out, "info store agents read: %s in %d pack(s), of which %s are your repository's own packs, linked (no disk of their own while your repository keeps them)\n",
			mib(u.Bytes), u.Packs, mib(u.Shared))
	}
}

// watchLines says how the change watchers of the repository's running
// sandboxes (bind mode) are: inotify watches used against the limit, the
// journal against its cap, events lost.
func watchLines(doc *Doctor, env *sandbox.Env) {
	limit := fswatch.UserLimit()
	ws := workspace.Watchers(doc.Ctx, env.Layout)
	if len(ws) == 0 {
		fmt.Fprintf(doc.Out, "info change watchers: none running (fs.inotify.max_user_watches is %d)\n", limit)
	}
	for _, w := range ws {
		switch {
		case w.Err != nil:
			fmt.Fprintf(doc.Out, "info change watcher of %s: not answering (%s); its snapshots look at every file\n", w.Sandbox, errText(w.Err))
		case w.Blind != "":
			fmt.Fprintf(doc.Out, "info change watcher of %s: stopped (%s); its snapshots look at every file\n", w.Sandbox, w.Blind)
		default:
			fmt.Fprintf(doc.Out, "info change watcher of %s: %d inotify watches (at most %d; fs.inotify.max_user_watches is %d), %d paths in its journal (at most %d), events lost %d time(s)\n",
				w.Sandbox, w.Watches, w.MaxWatches, limit, w.Paths, w.MaxPaths, w.Lost)
			if w.Linked > 0 {
				fmt.Fprintf(doc.Out, "info change watcher of %s: %d file(s) with a second hard link; its snapshots look at every file while there are any\n", w.Sandbox, w.Linked)
			}
		}
	}
}

// mib writes a size in MiB (in KiB below one).
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// warmLines lists the repository's warm images (setup's kept results),
// newest first.
func warmLines(doc *Doctor, d container.Engine, env *sandbox.Env) {
	imgs, err := d.Images().List(doc.Ctx, toolchain.LabelWarm+"=1", toolchain.LabelWarmRepo+"="+env.Repo.ID)
	if err != nil {
		fmt.Fprintf(doc.Out, "info warm images: %s\n", errText(err))
		return
	}
	slices.SortFunc(imgs, func(a, b container.Image) int { return b.Created.Compare(a.Created) })
	for i, img := range imgs {
		fmt.Fprintf(doc.Out, "info warm image %s (setup's result, made %s)\n", termsafe.String(toolchain.WarmName(img)), img.Created.Local().Format("2006-01-02 15:04"))
		if i == 1 {
			fmt.Fprintf(doc.Out, "     hint: git sandbox image prune removes all but the newest\n")
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

// proxyLine checks the egress proxy: this git-sandbox can run alone in its
// image (static), which fails the check only where the network is
// allowlist, and whether the environment's engine has that image yet
// (start makes it).
func proxyLine(doc *Doctor, cfg *config.Loaded, root string, check func(ok bool, what, detail, hint string)) {
	b, err := doc.ProxyBinary(root)
	if err != nil {
		hint := ""
		if ue, ok := usererr.As(err); ok && len(ue.Hints) > 0 {
			hint = ue.Hints[0]
		}
		if cfg.Network != container.NetworkAllowlist {
			fmt.Fprintf(doc.Out, "info egress proxy: %s (only allowlist sandboxes need it)\n", errText(err))
			return
		}
		check(false, "egress proxy", errText(err), hint)
		return
	}
	detail := "image " + b.Tag()
	if d, err := engines.Connect(doc.Ctx, cfg, ""); err == nil {
		if ok, err := d.Images().Exists(doc.Ctx, b.Tag()); err == nil && !ok {
			detail += " (the first allowlist start makes it)"
		}
		d.Close()
	}
	check(true, "egress proxy", detail, "")
}

// engineLines checks every engine of the user's config, all at once: it
// answers, its mode, and whether it has the sandbox image.
func engineLines(doc *Doctor, cfg *config.Loaded, check func(ok bool, what, detail, hint string)) {
	out := make([]engineResult, len(cfg.Engines))
	var wg sync.WaitGroup
	for i, n := range engines.All(cfg)[1:] {
		wg.Add(1)
		go func(i int, n engines.Named) {
			defer wg.Done()
			out[i] = engineLine(doc, cfg, n)
		}(i, n)
	}
	wg.Wait()
	for i, e := range cfg.Engines {
		check(out[i].ok, "engine "+termsafe.String(e.Name), out[i].detail, out[i].hint)
	}
}

// engineResult is one engine's line of doctor.
type engineResult struct {
	ok           bool
	detail, hint string
}

// engineLine checks one configured engine through the engine interface:
// it answers and can hold sandboxes (Check), its mode, and whether it has
// the sandbox image.
func engineLine(doc *Doctor, cfg *config.Loaded, n engines.Named) engineResult {
	d, err := engines.ConnectTo(doc.Ctx, n.Config)
	if err != nil {
		hint := "start its daemon, or fix host/context of [[engine]] " + n.Name + " in " + config.UserPath()
		if n.Config.IsKubernetes() {
			hint = "check the cluster (kubectl version), or kubeconfig/context of [[engine]] " + n.Name + " in " + config.UserPath()
		}
		return engineResult{detail: "unreachable: " + errText(err), hint: hint}
	}
	defer d.Close()
	detail, err := d.Check(doc.Ctx)
	if err != nil {
		return engineResult{detail: errText(err), hint: hintOf(err)}
	}
	ab := d.Abilities()
	mode := "bind mounts"
	if n.CopyMode(ab) {
		mode = "copy mode"
	}
	detail += ", " + mode
	if np, ok := d.(networkPolicyProber); ok {
		line, hint, fine := networkPolicyLine(doc, n, np)
		detail += ", " + line
		if !fine {
			return engineResult{detail: detail, hint: hint}
		}
	}
	if pool, ok := d.(container.HelperPool); ok && n.Config.WarmPods > 0 {
		detail += ", " + poolLine(doc, pool)
	}
	ok, err := d.Images().Exists(doc.Ctx, cfg.Image)
	switch {
	case err != nil:
		return engineResult{detail: detail + "; image: " + errText(err)}
	case !ok:
		detail += "; " + cfg.Image + " is missing there"
	}
	return engineResult{ok: true, detail: detail}
}

// poolLine says what the engine's warm pool holds and reserves, and
// removes its broken helpers.
func poolLine(doc *Doctor, pool container.HelperPool) string {
	st, err := pool.Pool(doc.Ctx, false)
	if err != nil {
		return "warm pool: " + errText(err)
	}
	line := fmt.Sprintf("warm pool: %d of %d ready", st.Ready, st.Size)
	if st.Starting > 0 {
		line += fmt.Sprintf(", %d starting", st.Starting)
	}
	if st.Removed > 0 {
		line += fmt.Sprintf(", %d broken removed", st.Removed)
	}
	return line + " (reserves " + st.Cost + ")"
}

// A networkPolicyProber is an engine whose allowlist mode holds only
// where its cluster enforces NetworkPolicy (container/kube).
type networkPolicyProber interface {
	NetworkPolicy(ctx context.Context, image string, fresh bool) (kube.Enforcement, error)
}

// networkPolicyLine probes again whether the engine's cluster enforces
// NetworkPolicy (the answer allowlist starts then go by), with the egress
// proxy's image: a FAIL where it does not, unless the engine's config
// accepts that.
func networkPolicyLine(doc *Doctor, n engines.Named, np networkPolicyProber) (line, hint string, ok bool) {
	accepted := n.Config.NetworkPolicy == config.NetworkPolicyUnenforcedOK
	root, err := worktree.StateRoot()
	var b proxyimage.Binary
	if err == nil {
		b, err = doc.ProxyBinary(root)
	}
	var en kube.Enforcement
	if err == nil {
		en, err = np.NetworkPolicy(doc.Ctx, b.Tag(), true)
	}
	switch {
	case err != nil:
		return "NetworkPolicy: cannot probe: " + errText(err), "allowlist sandboxes need the egress proxy's image on the cluster's nodes (proxy_image, or loaded there)", accepted
	case en.Enforced && en.OpenFor > 0:
		return fmt.Sprintf("NetworkPolicy enforced (a new Pod could connect for %s before its rules were in place)", en.OpenFor.Round(100*time.Millisecond)), "", true
	case en.Enforced && en.OpenFor == 0:
		return "NetworkPolicy enforced (a new Pod's rules were in place when it started)", "", true
	case en.Enforced:
		return "NetworkPolicy enforced", "", true
	case accepted:
		return "NetworkPolicy NOT enforced (network_policy = \"unenforced-ok\": allowlist agents can connect past the proxy)", "", true
	}
	return "NetworkPolicy NOT enforced: allowlist sandboxes are refused there",
		"run a network plugin that enforces NetworkPolicy, or set network_policy = \"unenforced-ok\" in [[engine]] " + n.Name + " of " + config.UserPath(), false
}

// hintOf is the first hint of a user error ("" for none).
func hintOf(err error) string {
	if ue, ok := usererr.As(err); ok && len(ue.Hints) > 0 {
		return ue.Hints[0]
	}
	return ""
}

// repairLines finishes what git sandbox processes killed midway left in
// this repository: a start's half-made sandbox (sandbox.RecoverStart), a
// land's move of a branch (land.RecoverAll). A "fixed" line says what was
// repaired.
func repairLines(doc *Doctor, env *sandbox.Env, check func(ok bool, what, detail, hint string)) {
	for _, dir := range recovery.List(env.Layout.RepoDir()) {
		branch := worktree.UnescapeBranch(filepath.Base(dir))
		ok, err := env.RecoverStart(doc.Ctx, branch)
		if err != nil {
			check(false, "interrupted start of "+termsafe.String(branch), errText(err), "git sandbox rm --force "+termsafe.String(branch))
		} else if ok {
			fmt.Fprintf(doc.Out, "fixed a start of %s was interrupted; removed what it had made\n", termsafe.String(branch))
		}
	}
	done, err := land.RecoverAll(doc.Ctx, env.Git(), env.Layout.LandDir())
	for _, d := range done {
		fmt.Fprintf(doc.Out, "fixed %s\n", termsafe.String(d))
	}
	if err != nil {
		check(false, "interrupted lands", errText(err), "look at the branch and its checkout, then remove the journal named")
	}
}

func orNone(found, wanted string) string {
	if found != "" {
		return found
	}
	return wanted + " (absent)"
}
