package verify

import (
	"context"
	"io"
	"os"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// Beside is a throwaway container run on one tree beside a sandbox (its
// verify, the user's commit hooks at land) or for a pushed commit: what
// Prepare turns into the Options of Run.
type Beside struct {
	Engine container.Engine
	Config *config.Loaded
	// Network makes a run's network (network.Env.VerifyNetwork).
	Network *network.Env
	// CommonDir is the user's repository, RepoID its id.
	CommonDir, RepoID string
	// Name is the run's container, Branch the sandbox's (or a name of its
	// own for a pushed commit), Role its role label.
	Name, Branch, Role string
	// Image finds (or makes) the image the run uses, once the run may go
	// ahead.
	Image func(ctx context.Context) (string, error)
	// Record is the sandbox's: the run never gets more network, a weaker
	// runtime or higher limits than the sandbox started with (nil for a
	// commit that is no sandbox's: the configuration's settings).
	Record *record.Record
	// NetDir holds the files of the run's proxy (verify_allow); WorkDir
	// the exported tree.
	NetDir, WorkDir string
	// Remote says the sandbox's files are on its engine (named
	// EngineName), which cannot mount this machine's: the tree goes in
	// through a volume, and a run that needs a proxy of its own is
	// refused.
	Remote     bool
	EngineName string
	// Pushed says the run is a pushed commit's (labelled with the
	// repository only, not with a sandbox's branch).
	Pushed bool
	// Out receives the run's output.
	Out io.Writer
}

// Prepare makes the run's options: settings, network (none unless
// verify_allow lists hosts), export budget, labels. cleanup removes what
// the network took.
func Prepare(ctx context.Context, b Beside) (Options, func(), error) {
	if b.Remote {
		if vp, err := network.VerifyPolicy(b.Config); err != nil || vp != nil {
			if err != nil {
				return Options{}, nil, err
			}
			name := termsafe.String(b.Branch)
			return Options{}, nil, usererr.New("verify with verify_allow (its egress proxy) is not available yet for sandbox %s: its files are in volumes on engine %s (copy mode)", name, termsafe.String(b.EngineName)).
				Hint("git sandbox diff %s shows the work; git sandbox land %s lands it (--force lands past a verify that cannot run)", name, name).
				WithCode(usererr.ExitRefused)
		}
	}
	image, err := b.Image(ctx)
	if err != nil {
		return Options{}, nil, err
	}
	set, err := ConfigSettings(b.Config)
	if err != nil {
		return Options{}, nil, err
	}
	set = set.Stricter(b.Record)
	maxBytes, err := ExportBudget(b.Config)
	if err != nil {
		return Options{}, nil, err
	}
	rn, cleanup, err := b.Network.VerifyNetwork(ctx, b.Engine, network.VerifyNetworkInput{
		Name: b.Name, Branch: b.Branch, Mode: set.Network, Runtime: set.Runtime, Dir: b.NetDir,
	})
	if err != nil {
		return Options{}, nil, err
	}
	labels := map[string]string{
		container.LabelManaged: "1", container.LabelRepo: b.RepoID,
		container.LabelRole: b.Role, container.LabelVersion: version.Version,
	}
	if !b.Pushed {
		labels[container.LabelBranch] = b.Branch
	}
	return Options{
		Engine: b.Engine, CommonDir: b.CommonDir, Image: image, Name: b.Name, Labels: labels,
		Network: rn.Mode, NetworkName: rn.Name, Env: rn.Env, Hosts: rn.Hosts,
		Runtime: set.Runtime, Limits: set.Limits,
		UID: os.Getuid(), GID: os.Getgid(),
		WorkDir: b.WorkDir, MaxBytes: maxBytes,
		Stdout: b.Out, Stderr: b.Out,
		Volumes: b.Remote,
	}, cleanup, nil
}
