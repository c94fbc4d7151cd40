package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// EgressPolicy is the allow list a sandbox of the agent gets in allowlist
// mode: the agent adapter's hosts, the user's allow list and --allow, less
// the user's and the repository's deny lists. Each entry keeps its source,
// for config show and the sandbox's record.
func EgressPolicy(cfg *config.Loaded, agentName string, flagAllow []string) (*egress.Policy, error) {
	p := &egress.Policy{}
	add := func(dst *[]egress.Entry, src egress.Source, entries []string) error {
		for _, s := range entries {
			e, err := egress.ParseEntry(s, src)
			if err != nil {
				return err
			}
			*dst = append(*dst, e)
		}
		return nil
	}
	if a, err := agent.Get(agentName); err == nil {
		if err := add(&p.Allow, egress.AdapterSource(a.Name()), a.Hosts()); err != nil {
			return nil, err
		}
	}
	// A secret's hosts are where its value goes: they are reachable.
	for _, s := range cfg.Secrets {
		if err := add(&p.Allow, egress.SecretSource(s.Name), s.Hosts); err != nil {
			return nil, err
		}
	}
	for _, step := range []struct {
		dst     *[]egress.Entry
		src     egress.Source
		entries []string
	}{
		{&p.Allow, egress.FromUser, cfg.Allow},
		{&p.Allow, egress.FromFlag, flagAllow},
		{&p.Remove, egress.FromUser, cfg.Deny},
		{&p.Remove, egress.FromRepository, cfg.RepoDeny},
	} {
		if err := add(step.dst, step.src, step.entries); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// VerifyPolicy is the allow list of a verify container: the user's
// verify_allow, less the deny lists; nil when verify has no network.
func VerifyPolicy(cfg *config.Loaded) (*egress.Policy, error) {
	if len(cfg.VerifyAllow) == 0 {
		return nil, nil
	}
	p := &egress.Policy{}
	for _, s := range cfg.VerifyAllow {
		e, err := egress.ParseEntry(s, egress.Source("user config (verify_allow)"))
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, e)
	}
	for _, d := range []struct {
		src     egress.Source
		entries []string
	}{{egress.FromUser, cfg.Deny}, {egress.FromRepository, cfg.RepoDeny}} {
		for _, s := range d.entries {
			e, err := egress.ParseEntry(s, d.src)
			if err != nil {
				return nil, err
			}
			p.Remove = append(p.Remove, e)
		}
	}
	return p, nil
}

// The egress proxy's container: the tool's own binary, mounted read-only
// into the sandbox's image (which is there offline), reading its
// configuration from a read-only mount and appending to its log.
const (
	proxyPort       = "3128"
	proxyBinary     = "/opt/git-sandbox/git-sandbox"
	proxyConfigDir  = "/etc/git-sandbox-proxy"
	proxyConfigFile = "proxy.json"
	proxyLogDir     = "/var/log/git-sandbox"
	proxyLogFile    = "egress.jsonl"
	// proxyReadyText is what the proxy prints once it listens.
	proxyReadyText = "proxy listening on"
)

// proxyReadyTimeout bounds the wait for a new proxy to listen.
var proxyReadyTimeout = 20 * time.Second

// EgressPlan is what allowlist mode adds to a sandbox: its policy, the two
// networks made for it and the proxy's container.
type EgressPlan struct {
	Allow  []egress.Rule `json:"allow"`
	Remove []egress.Rule `json:"remove,omitempty"`
	// InternalNetwork is the network the agent joins: internal (no route
	// out) and without a host address (no way to the host's ports).
	InternalNetwork string `json:"internal_network"`
	// EgressNetwork is the proxy's way out; nothing else joins it.
	EgressNetwork string `json:"egress_network"`
	// ProxyURL is what HTTP_PROXY, HTTPS_PROXY and ALL_PROXY say.
	ProxyURL string `json:"proxy_url"`
	// Log is the decision log on the host.
	Log   string          `json:"log"`
	Proxy *container.Spec `json:"proxy"`
	// Secrets are the credentials the proxy puts in place of their
	// placeholders (names, hosts and sources; never values).
	Secrets []SecretPlan `json:"secrets,omitempty"`

	// configDir and logDir are the host directories mounted into the proxy.
	configDir, logDir string
	// secrets are the secrets with their values, for the proxy's
	// configuration file only.
	secrets []egress.Secret
	// upstreamCA is the user's upstream_ca, copied into configDir.
	upstreamCA string
	// volumes, on an engine that cannot see this machine's files (copy
	// mode), replace those mounts: the binary and configuration are loaded
	// into a volume at each start of the proxy.
	volumes *proxyVolumes
}

// egressNames are the engine objects of one sandbox's allowlist mode,
// derived from its container's name: the internal network is unique per
// repository and branch, so no two agents share a network; every proxy
// leaves by the engine's one egress network (SharedEgressNetwork). The
// proxy's name is short, because the agent reaches it by name (a DNS label
// is at most 63 bytes).
func egressNames(containerName string) (internal, proxy string) {
	sum := sha256.Sum256([]byte(containerName))
	return containerName + "-net", "git-sandbox-proxy-" + hex.EncodeToString(sum[:])[:12]
}

// egressNetwork is the network the proxies leave by: the user's
// egress_network, else SharedEgressNetwork.
func (e *Env) egressNetwork() string {
	if e.Config.EgressNetwork != "" {
		return e.Config.EgressNetwork
	}
	return SharedEgressNetwork
}

// SharedEgressNetwork is the network every egress proxy of an engine
// leaves by. Only proxies join it, and it is never removed with a
// sandbox. One network for all instead of one per sandbox: an engine has
// a few dozen address ranges for networks it numbers itself, and two per
// sandbox ran out at about fifteen sandboxes. A proxy could reach another
// on it, but a proxy connects to no private address an entry does not
// name, and agents never join it.
const SharedEgressNetwork = "git-sandbox-egress"

// internalPool is where internal networks get their /27 from, numbered
// by us rather than the engine (whose pools would run out, see above).
// Their bridge has no host address (HostUnreachable), so the host gets no
// route to the range and it cannot hide a network the host uses; the
// engine refuses a range another of its networks has, and the next is
// tried.
var internalPool = netip.MustParsePrefix("10.213.0.0/16")

const (
	internalBits     = 27
	internalAttempts = 64
)

// internalSubnet is the i-th range to try for the network called name:
// spread by a hash of the name, so concurrent starts rarely collide.
func internalSubnet(name string, i int) string {
	n := 1 << (internalBits - internalPool.Bits())
	sum := sha256.Sum256([]byte(name))
	k := (int(sum[0])<<8 | int(sum[1]) + i) % n
	base := internalPool.Addr().As4()
	off := uint32(k) << (32 - internalBits)
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += off
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return netip.PrefixFrom(a, internalBits).String()
}

// createInternalNetwork makes a sandbox's internal network on a range of
// its own.
func createInternalNetwork(ctx context.Context, d Engine, name string, labels map[string]string) (*container.Network, error) {
	var err error
	for i := 0; i < internalAttempts; i++ {
		var n *container.Network
		n, err = d.CreateNetwork(ctx, container.NetworkSpec{
			Name: name, Internal: true, HostUnreachable: true, Subnet: internalSubnet(name, i), Labels: labels,
		})
		if !errors.Is(err, container.ErrAddressInUse) {
			return n, err
		}
	}
	return nil, usererr.Wrap(err, "no free address range for network %s in %s after %d tries", name, internalPool, internalAttempts).
		Hint("docker network ls shows the engine's networks; one of them may use the whole range")
}

// ensureEgressNetwork returns the id of the network called name, which
// the proxies leave by, made unless it exists (made by an earlier start,
// or for a user's egress_network by the user).
//
// An engine checks a new network's name against the others, but not
// atomically: two starts at the same moment can both make one. The oldest
// of that name wins, for every start alike (one that saw a single network
// saw the oldest, which was there first), and the others are removed when
// nothing uses them; the proxy joins the winner by id, never by the name
// that is ambiguous meanwhile.
func ensureEgressNetwork(ctx context.Context, d Engine, name string) (string, error) {
	pick := func() (string, []container.Network, error) {
		nets, err := d.ListNetworks(ctx, container.LabelRole+"="+container.RoleEgress)
		if err != nil {
			return "", nil, err
		}
		var same []container.Network
		for _, n := range nets {
			if n.Name == name {
				same = append(same, n)
			}
		}
		if len(same) == 0 {
			return "", nil, nil
		}
		sort.Slice(same, func(i, j int) bool {
			if !same[i].Created.Equal(same[j].Created) {
				return same[i].Created.Before(same[j].Created)
			}
			return same[i].ID < same[j].ID
		})
		return same[0].ID, same[1:], nil
	}
	id, extra, err := pick()
	if err != nil {
		return "", err
	}
	if id == "" {
		n, err := d.CreateNetwork(ctx, container.NetworkSpec{
			Name:   name,
			Labels: map[string]string{container.LabelRole: container.RoleEgress, container.LabelVersion: version.Version},
		})
		if err != nil && !container.IsConflict(err) {
			return "", err
		}
		if id, extra, err = pick(); err != nil {
			return "", err
		}
		if id == "" {
			if n == nil {
				// Not ours (no role label): a user's egress_network.
				return name, nil
			}
			return n.ID, nil
		}
	}
	for _, x := range extra {
		_ = d.RemoveNetwork(ctx, x.ID) // refused while a proxy uses it
	}
	return id, nil
}

// openNetworkName is the network of a sandbox in open mode: its own, so
// that no two sandboxes share a network in any mode.
func openNetworkName(containerName string) string { return containerName + "-open" }

// createOpenNetwork makes an open-mode sandbox's network: a bridge with a
// route out, inter-container traffic off. What it makes is added to u.
func (e *Env) createOpenNetwork(ctx context.Context, d Engine, branch, name string, u *undo) error {
	n, err := d.CreateNetwork(ctx, container.NetworkSpec{Name: name, Isolated: true, Labels: e.networkLabels(branch)})
	if err != nil {
		return err
	}
	cctx := context.WithoutCancel(ctx)
	u.add(func() { _ = d.RemoveNetwork(cctx, n.ID) })
	return e.step("open network")
}

// proxyEnv points every common HTTP client at the proxy, in both cases
// (curl reads only the lower-case http_proxy).
func proxyEnv(url string) []string {
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	const local = "localhost,127.0.0.1,::1"
	return append(env, "NO_PROXY="+local, "no_proxy="+local)
}

// proxySpecInput is what the proxy's container is made from.
type proxySpecInput struct {
	Name, Image, Binary, Network string
	ConfigDir, LogDir            string
	RepoID, Branch               string
	Runtime                      string
	UID, GID                     int
	// HostRoots makes the proxy trust this machine's certificate
	// authorities (copied into ConfigDir) instead of the image's.
	HostRoots bool
}

// proxySpec is the proxy's container: hardened like a sandbox and more
// (read-only root, small limits), running as the user's uid so the files
// it reads and writes stay the user's.
func proxySpec(in proxySpecInput) (*container.Spec, error) {
	spec := &container.Spec{
		Name:         in.Name,
		Image:        in.Image,
		Argv:         []string{proxyBinary, "__proxy", "--config", proxyConfigDir + "/" + proxyConfigFile},
		Env:          proxyContainerEnv(in.HostRoots),
		User:         strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkDir:      "/",
		Network:      container.NetworkOpen,
		NetworkName:  in.Network,
		Runtime:      in.Runtime,
		ReadOnlyRoot: true,
		Limits:       container.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 256},
		Labels: map[string]string{
			container.LabelManaged: "1",
			container.LabelRepo:    in.RepoID,
			container.LabelBranch:  in.Branch,
			container.LabelRole:    container.RoleProxy,
			container.LabelVersion: version.Version,
		},
	}
	spec.Harden()
	for _, m := range []container.Mount{
		{Source: in.Binary, Target: proxyBinary, ReadOnly: true, Why: "git-sandbox itself, which serves as the proxy"},
		{Source: in.ConfigDir, Target: proxyConfigDir, ReadOnly: true, Why: "the proxy's configuration: allow list, secrets' values, the sandbox CA's key"},
		{Source: in.LogDir, Target: proxyLogDir, Why: "the decision log"},
	} {
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return nil, err
		}
		m.Source = src
		spec.Mounts = append(spec.Mounts, m)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return spec, nil
}

// proxyContainerEnv is the proxy's environment. With hostRoots, Go's
// crypto/x509 reads this machine's roots (copied into the configuration
// directory) and no directory of the image: an image, perhaps the
// repository's, decides nothing about which servers a secret may go to.
func proxyContainerEnv(hostRoots bool) []string {
	env := []string{"HOME=/nonexistent"}
	if hostRoots {
		env = append(env, "SSL_CERT_FILE="+proxyConfigDir+"/"+proxyRoots, "SSL_CERT_DIR=/nonexistent")
	}
	return env
}

// planEgress plans allowlist mode for a sandbox whose container is named
// name.
func (e *Env) planEgress(name, branch, image, runtime, agentName string, allow []string) (*EgressPlan, error) {
	pol, err := EgressPolicy(e.Config, agentName, allow)
	if err != nil {
		return nil, err
	}
	l := e.Layout
	return e.planEgressFor(name, branch, image, runtime, pol, l.ProxyDir(branch), l.NetLogDir(branch))
}

// planEgressFor plans a proxy with policy pol for the container named name
// (a sandbox's agent or a verify run), its files in configDir and logDir.
func (e *Env) planEgressFor(name, branch, image, runtime string, pol *egress.Policy, configDir, logDir string) (*EgressPlan, error) {
	internal, proxy := egressNames(name)
	egressNet := e.egressNetwork()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find git-sandbox's own binary for the egress proxy: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("find git-sandbox's own binary for the egress proxy: %w", err)
	}
	spec, err := proxySpec(proxySpecInput{
		Name: proxy, Image: image, Binary: exe, Network: egressNet,
		ConfigDir: configDir, LogDir: logDir,
		RepoID: e.Repo.ID, Branch: branch, Runtime: runtime,
		UID: os.Getuid(), GID: os.Getgid(),
		HostRoots: hostRoots() != nil,
	})
	if err != nil {
		return nil, err
	}
	return &EgressPlan{
		Allow: egress.Rules(pol.Allow), Remove: egress.Rules(pol.Remove),
		InternalNetwork: internal, EgressNetwork: egressNet,
		ProxyURL:   "http://" + proxy + ":" + proxyPort,
		Log:        filepath.Join(logDir, proxyLogFile),
		Proxy:      spec,
		configDir:  configDir,
		logDir:     logDir,
		upstreamCA: e.Config.UpstreamCA,
	}, nil
}

// networkLabels stamp a sandbox's networks.
func (e *Env) networkLabels(branch string) map[string]string {
	return map[string]string{
		container.LabelRepo: e.Repo.ID, container.LabelBranch: branch,
		container.LabelRole: container.RoleProxy, container.LabelVersion: version.Version,
	}
}

// createEgress makes the sandbox's two networks and starts its proxy;
// everything it makes is added to u.
func (e *Env) createEgress(ctx context.Context, d Engine, branch string, p *EgressPlan, u *undo) error {
	cctx := context.WithoutCancel(ctx)
	labels := e.networkLabels(branch)
	in, err := createInternalNetwork(ctx, d, p.InternalNetwork, labels)
	if err != nil {
		return err
	}
	u.add(func() { _ = d.RemoveNetwork(cctx, in.ID) })
	if err := e.step("internal network"); err != nil {
		return err
	}
	return e.startProxy(ctx, d, branch, p, u)
}

// startProxy writes the proxy's configuration, then creates its container
// on the egress network, connects it to the internal one, starts it and
// waits until it listens. What it makes is added to u.
func (e *Env) startProxy(ctx context.Context, d Engine, branch string, p *EgressPlan, u *undo) error {
	cctx := context.WithoutCancel(ctx)
	for _, dir := range []string{p.configDir, p.logDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
	}
	// The shared egress network first: it may have been removed
	// (docker network prune) since the last start.
	egressID, err := ensureEgressNetwork(ctx, d, p.EgressNetwork)
	if err != nil {
		return fmt.Errorf("egress network: %w", err)
	}
	cfg := &egress.ProxyConfig{
		Listen:    ":" + proxyPort,
		Allow:     p.Allow,
		Remove:    p.Remove,
		HostAddrs: e.hostAddrs(ctx, d, branch),
		Log:       proxyLogDir + "/" + proxyLogFile,
	}
	if roots := hostRoots(); roots != nil {
		// What proxyContainerEnv points the proxy at.
		if err := egress.WriteFileAtomic(filepath.Join(p.configDir, proxyRoots), roots, 0o600); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
	}
	if len(p.secrets) > 0 {
		cfg.Secrets = egress.SecretConfigs(p.secrets)
		cfg.CACert = proxyConfigDir + "/" + proxyCACert
		cfg.CAKey = proxyConfigDir + "/" + proxyCAKey
		if p.upstreamCA != "" {
			b, err := os.ReadFile(p.upstreamCA)
			if err != nil {
				return usererr.Wrap(err, "upstream_ca: %v", err).Hint("fix upstream_ca in %s", config.UserPath())
			}
			if err := egress.WriteFileAtomic(filepath.Join(p.configDir, proxyUpstreamCA), b, 0o600); err != nil {
				return fmt.Errorf("egress proxy: %w", err)
			}
			cfg.UpstreamCA = proxyConfigDir + "/" + proxyUpstreamCA
		}
	}
	if err := egress.WriteConfig(filepath.Join(p.configDir, proxyConfigFile), cfg); err != nil {
		return err
	}
	if p.volumes != nil {
		if err := e.loadProxyVolumes(ctx, d, branch, p, u); err != nil {
			return err
		}
	}
	spec := p.Proxy.Clone()
	spec.NetworkName = egressID
	id, err := d.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	u.add(func() { _ = d.Remove(cctx, id) })
	if err := d.ConnectNetwork(ctx, p.InternalNetwork, id); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if err := e.step("proxy"); err != nil {
		return err
	}
	if err := d.Start(ctx, id); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	return waitProxy(ctx, d, id)
}

// waitProxy waits until the proxy says it listens, so the agent's first
// request finds it; a proxy that exits instead is an error with its output.
func waitProxy(ctx context.Context, d Engine, id string) error {
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		var out bytes.Buffer
		_ = d.Logs(ctx, id, container.LogsOptions{Tail: "all", Stdout: &out, Stderr: &out})
		if strings.Contains(out.String(), proxyReadyText) {
			return nil
		}
		st, err := d.Inspect(ctx, id)
		if err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
		if !st.Running || time.Now().After(deadline) {
			msg := strings.TrimSpace(termsafe.String(out.String()))
			if msg == "" {
				msg = "(no output)"
			}
			return usererr.New("the egress proxy did not start: %s", msg).
				Hint("the proxy is git-sandbox itself in the sandbox's image: build it static (make build, CGO_ENABLED=0)").
				Hint("or start with --network none, or --network open to go without a proxy")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// hostAddrs are the Docker host's own addresses the proxy must refuse
// like private ones: its gateways on the sandbox's networks and the
// addresses of this machine's interfaces.
func (e *Env) hostAddrs(ctx context.Context, d Engine, branch string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		s = a.Unmap().String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, filter := range [][]string{
		{container.LabelRepo + "=" + e.Repo.ID, container.LabelBranch + "=" + branch},
		{container.LabelRole + "=" + container.RoleEgress},
	} {
		if nets, err := d.ListNetworks(ctx, filter...); err == nil {
			for _, n := range nets {
				for _, g := range n.Gateways {
					add(g)
				}
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				add(p.Addr().String())
			}
		}
	}
	return out
}

// restartProxy replaces a sandbox's proxy container with a new one (this
// binary, the record's policy) before its agent runs again.
func (e *Env) restartProxy(ctx context.Context, d Engine, sb *Sandbox, io IO) error {
	eg := sb.Egress
	if eg == nil {
		return e.checkOpenNetwork(ctx, d, sb)
	}
	if err := d.Remove(ctx, eg.Proxy); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	nets, err := d.ListNetworks(ctx, container.LabelRepo+"="+e.Repo.ID, container.LabelBranch+"="+sb.Branch)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, n := range nets {
		have[n.Name] = true
	}
	// The internal network is the one the agent's container is bound to;
	// the egress network is shared and made again by startProxy. (Records
	// made before it was shared name one of their own, which rm removes.)
	for _, n := range []string{eg.InternalNetwork} {
		if !have[n] {
			return usererr.New("network %s of sandbox %s is gone", n, sb.Display()).
				Hint("its work is safe: git sandbox rescue list %s shows the snapshots", sb.Display()).
				Hint("git sandbox rm %s removes the rest, then start it again", sb.Display())
		}
	}
	p, err := e.planEgress(sb.Container, sb.Branch, sb.Image, e.Config.Runtime, sb.Agent, nil)
	if err != nil {
		return err
	}
	p.Allow, p.Remove = eg.Allow, eg.Remove
	if len(eg.Secrets) > 0 {
		if p.secrets, err = e.resumeSecrets(ctx, eg.Secrets, io); err != nil {
			return err
		}
		if len(p.secrets) > 0 {
			if err := writeTrust(p.configDir, e.Layout.TrustDir(sb.Branch), p.secrets); err != nil {
				return err
			}
		}
	}
	if sb.Copy != nil {
		if err := proxyOnVolumes(p); err != nil {
			return err
		}
	}
	var u undo
	if err := e.startProxy(ctx, d, sb.Branch, p, &u); err != nil {
		u.run()
		return err
	}
	return nil
}

// checkOpenNetwork refuses to resume an open-mode sandbox whose own
// network is gone (its container is bound to that network's id), with the
// same hints as a missing allowlist network.
func (e *Env) checkOpenNetwork(ctx context.Context, d Engine, sb *Sandbox) error {
	if sb.Spec == nil || sb.Spec.Network != container.NetworkOpen || sb.Spec.NetworkName == "" {
		return nil
	}
	nets, err := d.ListNetworks(ctx, container.LabelRepo+"="+e.Repo.ID, container.LabelBranch+"="+sb.Branch)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if n.Name == sb.Spec.NetworkName {
			return nil
		}
	}
	return usererr.New("network %s of sandbox %s is gone", sb.Spec.NetworkName, sb.Display()).
		Hint("its work is safe: git sandbox rescue list %s shows the snapshots", sb.Display()).
		Hint("git sandbox rm %s removes the rest, then start it again", sb.Display())
}

// stopProxy removes a sandbox's proxy container (the networks stay for
// the agent's container).
func (s *Sandbox) stopProxy(ctx context.Context, d Engine) error {
	if s.Egress == nil {
		return nil
	}
	return d.Remove(context.WithoutCancel(ctx), s.Egress.Proxy)
}

// removeNetworks removes every network made for the sandbox.
func (s *Sandbox) removeNetworks(ctx context.Context, d Engine) error {
	nets, err := d.ListNetworks(ctx, container.LabelRepo+"="+s.RepoID, container.LabelBranch+"="+s.Branch)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nets {
		if err := d.RemoveNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NetLog is the sandbox's egress decision log on the host.
func (s *Sandbox) NetLog() string { return s.env.Layout.NetLog(s.Branch) }

// CLIDenial is a host the sandbox's agent CLI needs (agent.NeedsHost) that
// its proxy denied.
type CLIDenial struct {
	Agent  string
	Host   string
	Port   uint16
	Reason string
	// Entry is what --allow would take: the host, with the port when it
	// is not the default one.
	Entry string
}

// CLIDenials reads the sandbox's decision log for denials of hosts its
// agent's CLI needs: the agent is likely stuck on them.
func (s *Sandbox) CLIDenials() []CLIDenial {
	if s.Egress == nil {
		return nil
	}
	a, err := agent.Get(s.Agent)
	if err != nil {
		return nil
	}
	sum, err := egress.SummarizeFile(s.NetLog())
	if err != nil {
		return nil
	}
	var out []CLIDenial
	for _, h := range sum.Hosts {
		if h.Denied == 0 || !agent.NeedsHost(a, h.Host) {
			continue
		}
		entry := h.Host
		if h.Port != 0 && h.Port != 443 && h.Port != 80 {
			entry = net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
		}
		out = append(out, CLIDenial{Agent: a.Name(), Host: h.Host, Port: h.Port, Reason: h.Reason, Entry: entry})
	}
	return out
}

// HintCLIDenials prints, for each host the agent's CLI needs and was
// denied, a warning and a hint naming --allow (or, for a host a deny list
// removed, that deny).
func HintCLIDenials(u interface {
	Warnf(string, ...any)
	Hintf(string, ...any)
}, denials []CLIDenial) {
	for _, d := range denials {
		host := termsafe.String(d.Host)
		u.Warnf("the %s CLI was denied %s:%d (%s)", d.Agent, host, d.Port, termsafe.String(d.Reason))
		if strings.HasPrefix(d.Reason, "removed by") {
			u.Hintf("a deny list removed it, which --allow does not undo: take it out of deny to let the %s CLI reach it", d.Agent)
			continue
		}
		u.Hintf("a new sandbox reaches it with git sandbox start NEW-BRANCH --allow %s (or allow = [%q] in your config); this sandbox keeps the list it started with", termsafe.String(d.Entry), d.Entry)
	}
}
