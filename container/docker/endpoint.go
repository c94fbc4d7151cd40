package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Endpoint is a Docker Engine other than the one the environment names.
type Endpoint struct {
	// Name is what the user calls it (for messages).
	Name string
	// Host is unix://…, tcp://… or ssh://….
	Host string
	// CertPath holds ca.pem, cert.pem and key.pem for a tcp:// host.
	CertPath string
	// Context is a Docker context to read Host and TLS files from.
	Context string
}

// ConnectTo reaches the engine e names.
func ConnectTo(ctx context.Context, e Endpoint) (*Engine, error) {
	if e.Context != "" {
		if err := e.fromContext(); err != nil {
			return nil, err
		}
	}
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	u, err := url.Parse(e.Host)
	if err != nil {
		return nil, e.unreachable(err)
	}
	switch u.Scheme {
	case "ssh":
		user, host, port := u.User.Username(), u.Hostname(), u.Port()
		opts = append(opts,
			client.WithHost("http://docker.example.invalid"),
			client.WithDialContext(func(ctx context.Context, _, _ string) (net.Conn, error) {
				return proc.DialSSH(ctx, user, host, port)
			}))
	default:
		opts = append(opts, client.WithHost(e.Host))
		if e.CertPath != "" {
			opts = append(opts, client.WithTLSClientConfig(
				filepath.Join(e.CertPath, "ca.pem"), filepath.Join(e.CertPath, "cert.pem"), filepath.Join(e.CertPath, "key.pem")))
		}
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, e.unreachable(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := api.Ping(pctx)
	if err != nil {
		api.Close()
		return nil, e.unreachable(err)
	}
	api.NegotiateAPIVersionPing(ping)
	return &Engine{api: api}, nil
}

func (e Endpoint) unreachable(err error) error {
	where := e.Host
	if e.Context != "" {
		where = "context " + e.Context
	}
	return usererr.Wrap(err, "cannot reach engine %s at %s", e.Name, where).
		Hint("check that its daemon runs and that host (or context) in [[engine]] %q of your config is right", e.Name).
		Hint("git sandbox doctor checks every configured engine")
}

// cliConfigDir is the Docker CLI's configuration directory:
// $DOCKER_CONFIG, else ~/.docker.
func cliConfigDir() (string, error) {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".docker"), nil
}

// fromContext fills Host and CertPath from the Docker CLI's store of
// contexts (~/.docker/contexts, or $DOCKER_CONFIG/contexts).
func (e *Endpoint) fromContext() error {
	dir, err := cliConfigDir()
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(e.Context))
	id := hex.EncodeToString(sum[:])
	b, err := os.ReadFile(filepath.Join(dir, "contexts", "meta", id, "meta.json"))
	if err != nil {
		return usererr.Wrap(err, "engine %s: no Docker context %q", e.Name, e.Context).
			Hint("docker context ls lists them")
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string
			SkipTLSVerify bool
		}
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("engine %s: read Docker context %q: %w", e.Name, e.Context, err)
	}
	ep, ok := meta.Endpoints["docker"]
	if !ok || ep.Host == "" {
		return usererr.New("engine %s: Docker context %q names no Docker endpoint", e.Name, e.Context)
	}
	e.Host = ep.Host
	tls := filepath.Join(dir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err == nil {
		e.CertPath = tls
	}
	return nil
}
