package config

import (
	"fmt"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Engine is one container engine from the user's config ([[engine]]):
// a Docker Engine reached over a unix socket, TCP with TLS, SSH, or a
// Docker context.
type Engine struct {
	// Name is how start --engine and default_engine name it.
	Name string `toml:"name"`
	// Host is the engine's address: unix://PATH, tcp://HOST:PORT or
	// ssh://[USER@]HOST[:PORT]. Exclusive with Context.
	Host string `toml:"host"`
	// CertPath is a directory with ca.pem, cert.pem and key.pem for a
	// tcp:// host with mutual TLS (as DOCKER_CERT_PATH).
	CertPath string `toml:"cert_path"`
	// Context names a Docker context (docker context ls) to read the
	// address and TLS files from.
	Context string `toml:"context"`
	// MaxSandboxes caps the sandboxes placed on the engine (0: no cap).
	MaxSandboxes int `toml:"max_sandboxes"`
	// Mode is how the sandbox's files reach the engine: "bind" mounts
	// host paths (the engine must share this machine's files), "copy"
	// keeps them in volumes on the engine, "auto" (the default) binds for
	// a local unix socket and copies otherwise.
	Mode string `toml:"mode"`
}

// Engine modes.
const (
	EngineModeAuto = "auto"
	EngineModeBind = "bind"
	EngineModeCopy = "copy"
)

// EngineAuto as default_engine places each new sandbox on the engine with
// the most memory left.
const EngineAuto = "auto"

// EngineNamed returns the configured engine called name.
func (l *Loaded) EngineNamed(name string) (*Engine, error) {
	for i := range l.Engines {
		if l.Engines[i].Name == name {
			return &l.Engines[i], nil
		}
	}
	var names []string
	for _, e := range l.Engines {
		names = append(names, e.Name)
	}
	ue := usererr.New("no engine %q in your config", name)
	if len(names) == 0 {
		return nil, ue.Hint("add one to %s: [[engine]] name = %q, host = \"ssh://user@box\", mode = \"copy\"", UserPath(), name)
	}
	return nil, ue.Hint("engines in %s: %s", UserPath(), strings.Join(names, ", "))
}

// CopyMode reports whether sandboxes on the engine keep their files in
// volumes on it rather than bind-mounting host paths.
func (e *Engine) CopyMode() bool {
	switch e.Mode {
	case EngineModeCopy:
		return true
	case EngineModeBind:
		return false
	}
	return !strings.HasPrefix(e.Host, "unix://") || e.Context != ""
}

// validateEngines checks the [[engine]] tables and default_engine.
func validateEngines(where string, engines []Engine, def string) error {
	seen := map[string]bool{}
	for _, e := range engines {
		bad := func(f string, a ...any) error {
			return usererr.New("%s: engine %q: %s", where, e.Name, fmt.Sprintf(f, a...)).
				Hint("an engine is [[engine]] name = \"big\", host = \"ssh://me@box\" (or tcp://… with cert_path, or context = \"NAME\"), mode = \"auto\" | \"bind\" | \"copy\"")
		}
		switch {
		case e.Name == "" || e.Name == EngineAuto || strings.ContainsAny(e.Name, " \t\n/\x00"):
			return bad("needs a name without spaces or slashes, other than %q", EngineAuto)
		case seen[e.Name]:
			return bad("is named twice")
		case (e.Host == "") == (e.Context == ""):
			return bad("needs exactly one of host and context")
		case e.Host != "" && !hasAnyPrefix(e.Host, "unix://", "tcp://", "ssh://"):
			return bad("host %q must start with unix://, tcp:// or ssh://", e.Host)
		case e.CertPath != "" && !strings.HasPrefix(e.Host, "tcp://"):
			return bad("cert_path is for a tcp:// host")
		case e.MaxSandboxes < 0:
			return bad("max_sandboxes must be 0 (no cap) or more")
		}
		switch e.Mode {
		case "", EngineModeAuto, EngineModeBind, EngineModeCopy:
		default:
			return bad("mode %q must be auto, bind or copy", e.Mode)
		}
		seen[e.Name] = true
	}
	if def != "" && def != EngineAuto && !seen[def] {
		return usererr.New("%s: default_engine = %q names no [[engine]]", where, def).
			Hint("name one of your engines, or \"auto\"")
	}
	return nil
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
