package network

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/record"
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
		parse := egress.ParseAllowEntry
		if dst == &p.Remove {
			parse = egress.ParseEntry // a removal names hosts only
		}
		for _, s := range entries {
			e, err := parse(s, src)
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

// The egress proxy's container: the tool's own binary in an image that
// holds nothing else (internal/proxyimage), reading its configuration from
// a read-only mount and appending to its log.
const (
	ProxyPort       = "3128"
	proxyBinary     = proxyimage.Path
	ProxyConfigDir  = "/etc/git-sandbox-proxy"
	ProxyConfigFile = "proxy.json"
	ProxyLogDir     = "/var/log/git-sandbox"
	ProxyLogFile    = "egress.jsonl"
	// ProxyReadyText is what the proxy prints once it listens.
	ProxyReadyText = "proxy listening on"
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
	// ProxyURL is what HTTP_PROXY, HTTPS_PROXY and ALL_PROXY say: the
	// proxy at its address once it has one (setProxyAddr), else by name.
	// Most clients look the proxy's name up for every connection they
	// open (Go's and Rust's in a thread of their own, Node's in its
	// thread pool, glibc's reading the hosts file again each time): an
	// address is never looked up.
	ProxyURL string `json:"proxy_url"`
	// ProxyAddr is where the proxy is on the internal network, once it is
	// made, on an engine with fixed addresses: the agent's hosts file
	// gives the name that address too (AgentHosts), for what the agent
	// reaches by the name.
	ProxyAddr netip.Addr `json:"proxy_addr,omitzero"`
	// Log is the decision log on the host.
	Log   string          `json:"log"`
	Proxy *container.Spec `json:"proxy"`
	// Secrets are the credentials the proxy puts in place of their
	// placeholders (names, hosts and sources; never values).
	Secrets []SecretPlan `json:"secrets,omitempty"`
	// Inspect are the hosts whose TLS the proxy terminates though no
	// secret goes there (the user's [[host]] inspect = true), so that the
	// method and path rules of their allow entries apply.
	Inspect []string `json:"inspect,omitempty"`
	// Forward are the agent's published ports, which the proxy carries
	// (SetForward).
	Forward []container.Port `json:"forward,omitempty"`
	// Budget is what the sandbox may spend on model calls through the
	// credential broker (kept only with Secrets).
	Budget meter.Budget `json:"budget,omitzero"`

	// configDir and logDir are the host directories mounted into the proxy.
	configDir, logDir string
	// secrets are the secrets with their values, for the proxy's
	// configuration file only.
	secrets []egress.Secret
	// upstreamCA is the user's upstream_ca, copied into configDir.
	upstreamCA string
	// binary is what the proxy's image holds: this git-sandbox.
	binary proxyimage.Binary
	// live are the sandbox's live changes (record.Egress.Live).
	live *egress.LivePolicy
	// prompt holds connections off the list for the user's answer
	// (network_prompt; a sandbox's proxy only, never verify's).
	prompt bool
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

// InternalPool is where internal networks get their /27 from, numbered
// by us rather than the engine (whose pools would run out, see above).
// Their bridge has no host address (HostUnreachable), so the host gets no
// route to the range and it cannot hide a network the host uses; the
// engine refuses a range another of its networks has, and the next is
// tried.
var InternalPool = netip.MustParsePrefix("10.213.0.0/16")

const (
	InternalBits     = 27
	internalAttempts = 64
)

// proxyAddress is the egress proxy's address on an internal network of
// range sub: its last, which its upper half keeps for it.
func proxyAddress(sub netip.Prefix) netip.Addr {
	return addrPlus(sub.Addr(), 1<<(32-sub.Bits())-2)
}

// addrPlus is the IPv4 address off after a.
func addrPlus(a netip.Addr, off uint32) netip.Addr {
	b := a.As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(b[:])+off)
	return netip.AddrFrom4(out)
}

// internalSubnet is the i-th range to try for the network called name:
// spread by a hash of the name, so concurrent starts rarely collide.
func internalSubnet(name string, i int) netip.Prefix {
	n := 1 << (InternalBits - InternalPool.Bits())
	sum := sha256.Sum256([]byte(name))
	k := (int(sum[0])<<8 | int(sum[1]) + i) % n
	return netip.PrefixFrom(addrPlus(InternalPool.Addr(), uint32(k)<<(32-InternalBits)), InternalBits)
}

// createInternalNetwork makes a sandbox's internal network on a range of
// its own. On an engine with fixed addresses, its members are numbered
// in the lower half of the range and the proxy's address (proxyAddress)
// is kept out of it; proxy is that address then, else the zero Addr.
func createInternalNetwork(ctx context.Context, d Engine, name string, labels map[string]string) (n *container.Network, proxy netip.Addr, err error) {
	fixed := d.Abilities().FixedAddresses
	for i := 0; i < internalAttempts; i++ {
		sub := internalSubnet(name, i)
		spec := container.NetworkSpec{Name: name, Internal: true, HostUnreachable: true, Subnet: sub.String(), Labels: labels}
		if fixed {
			spec.MemberRange = netip.PrefixFrom(sub.Addr(), sub.Bits()+1).String()
		}
		n, err = d.CreateNetwork(ctx, spec)
		if !errors.Is(err, container.ErrAddressInUse) {
			if err == nil && fixed {
				proxy = proxyAddress(sub)
			}
			return n, proxy, err
		}
	}
	return nil, netip.Addr{}, usererr.Wrap(err, "no free address range for network %s in %s after %d tries", name, InternalPool, internalAttempts).
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

// OpenNetworkName is the network of a sandbox in open mode: its own, so
// that no two sandboxes share a network in any mode.
func OpenNetworkName(containerName string) string { return containerName + "-open" }

// createOpenNetwork makes an open-mode sandbox's network: a bridge with a
// route out, inter-container traffic off. What it makes is added to u.
func (e *Env) createOpenNetwork(ctx context.Context, d Engine, branch, name string, u Undo) error {
	n, err := d.CreateNetwork(ctx, container.NetworkSpec{Name: name, Isolated: true, Labels: e.networkLabels(branch)})
	if err != nil {
		return err
	}
	cctx := context.WithoutCancel(ctx)
	u.Add(func() { _ = d.RemoveNetwork(cctx, n.ID) })
	return e.step("open network")
}

// proxyURLVars are the variables that name the proxy (ProxyEnv sets each
// in both cases).
var proxyURLVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"}

// proxyURL is the proxy's URL at host.
func proxyURL(host string) string { return "http://" + net.JoinHostPort(host, ProxyPort) }

// ProxyEnv points every common HTTP client at the proxy, in both cases
// (curl reads only the lower-case http_proxy).
func ProxyEnv(url string) []string {
	var env []string
	for _, k := range proxyURLVars {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	const local = "localhost,127.0.0.1,::1"
	return append(env, "NO_PROXY="+local, "no_proxy="+local)
}

// proxySpecInput is what the proxy's container is made from.
type proxySpecInput struct {
	// Image is the proxy's image (proxyimage.Binary.Tag): never a
	// sandbox's.
	Name, Image, Network string
	ConfigDir, LogDir    string
	RepoID, Branch       string
	Runtime              string
	UID, GID             int
	// HostRoots makes the proxy trust this machine's certificate
	// authorities (copied into ConfigDir).
	HostRoots bool
}

// proxySpec is the proxy's container: the tool's own image, with its
// entrypoint, command, environment, user and healthcheck (none) all set
// here, so nothing of any image runs or applies in it; hardened like a
// sandbox and more (read-only root, small limits), running as the user's
// uid so the files it reads and writes stay the user's.
func proxySpec(in proxySpecInput) (*container.Spec, error) {
	spec := &container.Spec{
		Name:          in.Name,
		Image:         in.Image,
		ToolImage:     true,
		Entrypoint:    []string{proxyBinary},
		Argv:          proxyArgv(false),
		Env:           proxyContainerEnv(in.HostRoots),
		User:          strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkDir:       "/",
		Network:       container.NetworkOpen,
		NetworkName:   in.Network,
		Runtime:       in.Runtime,
		ReadOnlyRoot:  true,
		NoHealthcheck: true,
		Limits:        container.Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 256},
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
		{Source: in.ConfigDir, Target: ProxyConfigDir, ReadOnly: true, Why: "the proxy's configuration: allow list, secrets' values, the sandbox CA's key"},
		{Source: in.LogDir, Target: ProxyLogDir, Why: "the decision log"},
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

// proxyContainerEnv is the proxy's whole environment: its image has none.
// With HostRoots, Go's crypto/x509 reads this machine's roots (copied into
// the configuration directory) and no directory: nothing but the user's
// machine and config decides which servers a secret may go to.
func proxyContainerEnv(HostRoots bool) []string {
	env := []string{"HOME=/nonexistent"}
	if HostRoots {
		env = append(env, "SSL_CERT_FILE="+ProxyConfigDir+"/"+ProxyRoots, "SSL_CERT_DIR=/nonexistent")
	}
	return env
}

// egressInput is what a sandbox's allowlist mode is planned from.
type EgressInput struct {
	// Name is the sandbox's container.
	Name, Branch, Runtime string
	// Agent names the adapter whose hosts are allowed; Allow is --allow.
	Agent string
	Allow []string
	// DryRun plans a proxy even for a git-sandbox that cannot be one
	// (dynamically linked), with a warning: only a start refuses it.
	DryRun bool
	// Budget is --budget (dollars), over the user's budget.model.
	Budget string
}

// PlanEgress plans allowlist mode for a sandbox.
func (e *Env) PlanEgress(in EgressInput) (*EgressPlan, error) {
	pol, err := EgressPolicy(e.Config, in.Agent, in.Allow)
	if err != nil {
		return nil, err
	}
	budget, err := e.budget(in.Budget)
	if err != nil {
		return nil, err
	}
	l := e.Layout
	p, err := e.planEgressFor(proxyPlanInput{
		Name: in.Name, Branch: in.Branch, Runtime: in.Runtime, Policy: pol,
		ConfigDir: l.ProxyDir(in.Branch), LogDir: l.NetLogDir(in.Branch), DryRun: in.DryRun,
	})
	if p != nil {
		p.Budget = budget
		p.prompt = e.Config.NetworkPrompt
		p.Inspect = e.Config.InspectHosts()
	}
	return p, err
}

// proxyPlanInput is what a proxy is planned from: its policy, for the
// container named Name (a sandbox's agent or a verify run), its files in
// ConfigDir and LogDir.
type proxyPlanInput struct {
	Name, Branch, Runtime string
	Policy                *egress.Policy
	ConfigDir, LogDir     string
	// DryRun: see EgressInput.
	DryRun bool
}

// planEgressFor plans a proxy. A git-sandbox that cannot run alone in
// the proxy's image (dynamically linked) is refused here, before anything
// is made.
func (e *Env) planEgressFor(in proxyPlanInput) (*EgressPlan, error) {
	name, branch, configDir, logDir := in.Name, in.Branch, in.ConfigDir, in.LogDir
	internal, proxy := egressNames(name)
	egressNet := e.egressNetwork()
	bin, err := e.proxyBinaryOf()
	if err != nil {
		if !in.DryRun || !errors.Is(err, proxyimage.ErrNotStatic) {
			return nil, err
		}
		e.UI.Warnf("start would refuse: %v", err)
	}
	spec, err := proxySpec(proxySpecInput{
		Name: proxy, Image: bin.Tag(), Network: egressNet,
		ConfigDir: configDir, LogDir: logDir,
		RepoID: e.Repo.ID, Branch: branch, Runtime: in.Runtime,
		UID: os.Getuid(), GID: os.Getgid(),
		HostRoots: HostRoots() != nil,
	})
	if err != nil {
		return nil, err
	}
	return &EgressPlan{
		Allow: egress.Rules(in.Policy.Allow), Remove: egress.Rules(in.Policy.Remove),
		InternalNetwork: internal, EgressNetwork: egressNet,
		ProxyURL:   proxyURL(proxy),
		Log:        filepath.Join(logDir, ProxyLogFile),
		Proxy:      spec,
		configDir:  configDir,
		logDir:     logDir,
		upstreamCA: e.Config.UpstreamCA,
		binary:     bin,
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
func (e *Env) createEgress(ctx context.Context, d Engine, branch string, p *EgressPlan, u Undo) error {
	cctx := context.WithoutCancel(ctx)
	labels := e.networkLabels(branch)
	in, addr, err := createInternalNetwork(ctx, d, p.InternalNetwork, labels)
	if err != nil {
		return err
	}
	p.setProxyAddr(addr)
	u.Add(func() { _ = d.RemoveNetwork(cctx, in.ID) })
	if err := e.step("internal network"); err != nil {
		return err
	}
	return e.startProxy(ctx, d, branch, p, u)
}

// startProxy writes the proxy's configuration, then creates its container
// on the egress network, connects it to the internal one, starts it and
// waits until it listens. What it makes is added to u.
func (e *Env) startProxy(ctx context.Context, d Engine, branch string, p *EgressPlan, u Undo) error {
	cctx := context.WithoutCancel(ctx)
	if err := e.requireIsolation(ctx, d, p); err != nil {
		return err
	}
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
		Listen:    ":" + ProxyPort,
		Allow:     p.Allow,
		Remove:    p.Remove,
		Live:      ProxyConfigDir + "/" + egress.LiveFile,
		HostAddrs: e.hostAddrs(ctx, d, branch),
		Log:       ProxyLogDir + "/" + ProxyLogFile,
	}
	if err := egress.WriteLive(filepath.Join(p.configDir, egress.LiveFile), p.live); err != nil {
		return err
	}
	cfg.Prompt = e.promptConfig(p)
	if roots := HostRoots(); roots != nil {
		// What proxyContainerEnv points the proxy at.
		if err := atomicfile.Write(filepath.Join(p.configDir, ProxyRoots), roots, 0o600); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
	}
	if err := e.brokerConfig(cfg, p); err != nil {
		return err
	}
	if err := egress.WriteConfig(filepath.Join(p.configDir, ProxyConfigFile), cfg); err != nil {
		return err
	}
	if err := writeForward(p); err != nil {
		return err
	}
	if _, err := EnsureProxyImage(ctx, d, p.binary, e.UI); err != nil {
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
		return ambiguous(fmt.Errorf("egress proxy: %w", err), p.EgressNetwork)
	}
	u.Add(func() { _ = d.Remove(cctx, id) })
	if err := d.ConnectNetwork(ctx, p.InternalNetwork, id, p.ProxyAddr); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if err := e.step("proxy"); err != nil {
		return err
	}
	if err := startProxy(ctx, d, p.EgressNetwork, id); err != nil {
		return err
	}
	return waitProxy(ctx, d, id)
}

// ambiguousTries is how many times a proxy's start is tried while its
// egress network's name is ambiguous.
const ambiguousTries = 5

// ambiguous says what to do about err when it is the engine's refusal of
// a network name that more than one network has.
func ambiguous(err error, name string) error {
	if !errors.Is(err, container.ErrAmbiguousName) {
		return err
	}
	return usererr.Wrap(err, "egress proxy: more than one network is called %s", name).
		Hint("docker network ls --filter name=%s lists them; docker network rm ID removes one no container uses", name)
}

// startProxy starts the proxy container id, which leaves by the network
// called name. The engine looks that name up at start, and finds it
// ambiguous while a second network of the name is there: one another
// start made at the same moment, which it removes once it sees the older
// one (ensureEgressNetwork); that removal is done here too, and the start
// tried again.
func startProxy(ctx context.Context, d Engine, name, id string) error {
	for try := 1; ; try++ {
		err := d.Start(ctx, id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, container.ErrAmbiguousName) {
			return fmt.Errorf("egress proxy: %w", err)
		}
		if try == ambiguousTries {
			return ambiguous(err, name)
		}
		if _, err := ensureEgressNetwork(ctx, d, name); err != nil {
			return fmt.Errorf("egress network: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
	}
}

// brokerConfig gives the proxy of a plan with secrets what the credential
// broker needs: the secrets, the CA's files, the user's upstream CA and
// the meter's files.
func (e *Env) brokerConfig(cfg *egress.ProxyConfig, p *EgressPlan) error {
	if !p.Terminates() {
		return nil
	}
	if len(p.secrets) > 0 {
		if err := e.meterConfig(cfg, p.configDir, p.Budget); err != nil {
			return err
		}
	}
	cfg.Secrets, cfg.Inspect = egress.SecretConfigs(p.secrets), p.Inspect
	cfg.CACert = ProxyConfigDir + "/" + proxyCACert
	cfg.CAKey = ProxyConfigDir + "/" + proxyCAKey
	if p.upstreamCA == "" {
		return nil
	}
	b, err := os.ReadFile(p.upstreamCA)
	if err != nil {
		return usererr.Wrap(err, "upstream_ca: %v", err).Hint("fix upstream_ca in %s", config.UserPath())
	}
	if err := atomicfile.Write(filepath.Join(p.configDir, proxyUpstreamCA), b, 0o600); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	cfg.UpstreamCA = ProxyConfigDir + "/" + proxyUpstreamCA
	return nil
}

// promptConfig is the proxy's prompting: on with the user's
// network_prompt. A copy-mode proxy's held requests are on its engine: the
// sandbox's supervisor keeps a copy here (MirrorProxy).
func (e *Env) promptConfig(p *EgressPlan) *held.Config {
	if !p.prompt {
		return nil
	}
	return &held.Config{Held: ProxyLogDir + "/" + held.File, Timeout: e.Config.PromptTimeout().String()}
}

// An isolationChecker is an engine whose containers are kept apart not
// by itself but by something it can only ask about: a Kubernetes
// cluster's network plugin, which enforces NetworkPolicy or not
// (container/kube). Allowlist mode asks it before the proxy starts; it
// refuses, or warns when the user's config accepts the risk.
type isolationChecker interface {
	RequireIsolation(ctx context.Context, probeImage string) (warning string, err error)
}

// requireIsolation asks an engine that can only ask whether allowlist
// mode's networks hold there; the probe runs the proxy's image.
func (e *Env) requireIsolation(ctx context.Context, d Engine, p *EgressPlan) error {
	ic, ok := d.(isolationChecker)
	if !ok {
		return nil
	}
	warning, err := ic.RequireIsolation(ctx, p.Proxy.Image)
	if err != nil {
		return err
	}
	if warning != "" {
		e.UI.Warnf("%s", warning)
	}
	return nil
}

// waitProxy waits until the proxy says it listens, so the agent's first
// request finds it; a proxy that exits instead is an error with its output.
func waitProxy(ctx context.Context, d Engine, id string) error {
	deadline := time.Now().Add(proxyReadyTimeout)
	for {
		var out bytes.Buffer
		_ = d.Logs(ctx, id, container.LogsOptions{Tail: "all", Stdout: &out, Stderr: &out})
		if strings.Contains(out.String(), ProxyReadyText) {
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
				Hint("the proxy is git-sandbox itself, alone in an image of its own: the engine must run this machine's architecture").
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

// SetSecrets gives the plan its secrets: shown (names, hosts, sources)
// for the dry run, and the values, for the proxy's configuration only.
func (p *EgressPlan) SetSecrets(shown []SecretPlan, secrets []egress.Secret) {
	p.Secrets, p.secrets = shown, secrets
}

// HasSecrets reports whether the plan brokers credentials.
func (p *EgressPlan) HasSecrets() bool { return len(p.secrets) > 0 }

// Terminates reports whether the proxy terminates TLS for some host (a
// secret's, or one to inspect): the sandbox then has a CA of its own,
// which the agent's container trusts.
func (p *EgressPlan) Terminates() bool { return len(p.secrets)+len(p.Inspect) > 0 }

// caHosts are the hosts the sandbox's CA may name: its secrets' and those
// it inspects.
func (p *EgressPlan) caHosts() []string { return append(secretHosts(p.secrets), p.Inspect...) }

// setProxyAddr keeps the proxy's address on the internal network (none
// on an engine that gives its own), and points ProxyURL at it.
func (p *EgressPlan) setProxyAddr(a netip.Addr) {
	p.ProxyAddr = a
	if a.IsValid() {
		p.ProxyURL = proxyURL(a.String())
	}
}

// AgentEnv is env with the proxy variables the plan set (naming the
// proxy) pointing at ProxyURL as it is now: the agent's container was
// planned before its proxy had an address. Nothing else changes (a
// NO_PROXY of the user's stays).
func (p *EgressPlan) AgentEnv(env []string) []string {
	planned := proxyURL(p.Proxy.Name)
	out := slices.Clone(env)
	for i, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		if v == planned && slices.Contains(proxyURLVars, strings.ToUpper(k)) {
			out[i] = k + "=" + p.ProxyURL
		}
	}
	return out
}

// AgentHosts are the names the agent's hosts file gives: its proxy's, at
// its fixed address (none before the networks are made, or on an engine
// that gives addresses itself).
func (p *EgressPlan) AgentHosts() []container.Host {
	if p == nil || !p.ProxyAddr.IsValid() {
		return nil
	}
	return []container.Host{{Name: p.Proxy.Name, Addr: p.ProxyAddr}}
}

// Record is what the sandbox's record keeps of the plan.
func (p *EgressPlan) Record() *record.Egress {
	return &record.Egress{
		Allow: p.Allow, Remove: p.Remove,
		InternalNetwork: p.InternalNetwork, EgressNetwork: p.EgressNetwork, Proxy: p.Proxy.Name, ProxyAddr: p.ProxyAddr,
		Secrets: recordSecrets(p.secrets), Inspect: p.Inspect, Forward: record.PortsOf(p.Forward), Budget: p.Budget,
	}
}

// VerifyNetwork gives a container run beside a sandbox (verify, commit
// hooks, a pushed commit's verify) its network: none, unless the user's
// verify_allow lists hosts and mode (the sandbox's own, or the config's)
// allows a network at all; then networks and a proxy of its own, made here
// and removed by cleanup. dir holds the proxy's files.
func (e *Env) VerifyNetwork(ctx context.Context, d Engine, in VerifyNetworkInput) (RunNetwork, func(), error) {
	none := func() {}
	vp, err := VerifyPolicy(e.Config)
	if err != nil {
		return RunNetwork{}, none, err
	}
	if vp == nil || in.Mode == container.NetworkNone {
		return RunNetwork{Mode: container.NetworkNone}, none, nil
	}
	eg, err := e.planEgressFor(proxyPlanInput{
		Name: in.Name, Branch: in.Branch, Runtime: in.Runtime, Policy: vp,
		ConfigDir: filepath.Join(in.Dir, "verify-proxy"), LogDir: filepath.Join(in.Dir, "verify-net"),
	})
	if err != nil {
		return RunNetwork{}, none, err
	}
	var u undoList
	if err := e.createEgress(ctx, d, in.Branch, eg, &u); err != nil {
		u.run()
		return RunNetwork{}, none, err
	}
	return RunNetwork{Mode: container.NetworkAllowlist, Name: eg.InternalNetwork, Env: ProxyEnv(eg.ProxyURL), Hosts: eg.AgentHosts()}, u.run, nil
}

// RunNetwork is what a run beside a sandbox joins: its mode, the network
// (allowlist mode's internal one), the environment that points at its
// proxy and the hosts-file lines that find it.
type RunNetwork struct {
	Mode  container.NetworkMode
	Name  string
	Env   []string
	Hosts []container.Host
}

// VerifyNetworkInput names a run beside a sandbox and what its network
// may be.
type VerifyNetworkInput struct {
	// Name is the run's container, Branch the sandbox's.
	Name, Branch string
	// Mode is the most open network the run may have; Runtime its runtime.
	Mode    container.NetworkMode
	Runtime string
	// Dir holds the proxy's files.
	Dir string
}

// RestartProxy replaces a sandbox's proxy container with a new one (this
// binary, the record's policy) before its agent runs again; onEngine says
// its files are volumes on the engine (copy mode).
func (e *Env) RestartProxy(ctx context.Context, d Engine, sb *record.Record, onEngine bool, io IO) error {
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
			return usererr.New("network %s of sandbox %s is gone", n, termsafe.String(sb.Branch)).
				Hint("its work is safe: git sandbox rescue list %s shows the snapshots", termsafe.String(sb.Branch)).
				Hint("git sandbox rm %s removes the rest, then start it again", termsafe.String(sb.Branch))
		}
	}
	p, err := e.PlanEgress(EgressInput{Name: sb.Container, Branch: sb.Branch, Runtime: e.Config.Runtime, Agent: sb.Agent})
	if err != nil {
		return err
	}
	// The hosts inspected are those of the start: the agent's container
	// trusts the sandbox's CA only if it had one then.
	p.Allow, p.Remove, p.live, p.Budget, p.Inspect = eg.Allow, eg.Remove, eg.Live, eg.Budget, eg.Inspect
	// The agent's hosts file names the address of the start.
	p.setProxyAddr(eg.ProxyAddr)
	p.SetForward(record.ToPorts(eg.Forward))
	if len(eg.Secrets) > 0 {
		if p.secrets, err = e.resumeSecrets(ctx, eg.Secrets, io); err != nil {
			return err
		}
	}
	if p.Terminates() {
		if err := writeTrust(p.configDir, e.Layout.TrustDir(sb.Branch), p.caHosts()); err != nil {
			return err
		}
	}
	if onEngine {
		if err := ProxyOnVolumes(p); err != nil {
			return err
		}
	}
	var u undoList
	if err := e.startProxy(ctx, d, sb.Branch, p, &u); err != nil {
		u.run()
		return err
	}
	return nil
}

// checkOpenNetwork refuses to resume an open-mode sandbox whose own
// network is gone (its container is bound to that network's id), with the
// same hints as a missing allowlist network.
func (e *Env) checkOpenNetwork(ctx context.Context, d Engine, sb *record.Record) error {
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
	return usererr.New("network %s of sandbox %s is gone", sb.Spec.NetworkName, termsafe.String(sb.Branch)).
		Hint("its work is safe: git sandbox rescue list %s shows the snapshots", termsafe.String(sb.Branch)).
		Hint("git sandbox rm %s removes the rest, then start it again", termsafe.String(sb.Branch))
}

// StopProxy removes a sandbox's proxy container (the networks stay for
// the agent's container).
func StopProxy(ctx context.Context, d Engine, s *record.Record) error {
	if s.Egress == nil {
		return nil
	}
	return d.Remove(context.WithoutCancel(ctx), s.Egress.Proxy)
}

// RemoveNetworks removes every network made for the sandbox.
func RemoveNetworks(ctx context.Context, d Engine, s *record.Record) error {
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
func (e *Env) NetLog(branch string) string { return e.Layout.NetLog(branch) }

// CLIDenial is a host the sandbox's agent CLI needs (agent.NeedsHost) that
// its proxy denied.
type CLIDenial struct {
	// Branch is the sandbox's.
	Branch string
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
func (e *Env) CLIDenials(s *record.Record) []CLIDenial {
	netLog := e.NetLog(s.Branch)
	if s.Egress == nil {
		return nil
	}
	a, err := agent.Get(s.Agent)
	if err != nil {
		return nil
	}
	sum, err := netlog.SummarizeFile(netLog)
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
		out = append(out, CLIDenial{Branch: s.Branch, Agent: a.Name(), Host: h.Host, Port: h.Port, Reason: h.Reason, Entry: entry})
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
			u.Hintf("a deny list removed it, which --allow does not undo: take it out of deny (or, for a live denial, git sandbox net allow %s %s) to let the %s CLI reach it", termsafe.String(d.Branch), termsafe.String(d.Entry), d.Agent)
			continue
		}
		u.Hintf("git sandbox net allow %s %s lets this sandbox reach it at once; a new sandbox reaches it with git sandbox start NEW-BRANCH --allow %s (or allow = [%q] in your config)",
			termsafe.String(d.Branch), termsafe.String(d.Entry), termsafe.String(d.Entry), d.Entry)
	}
}
