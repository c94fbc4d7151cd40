package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Push tags source as ref and pushes ref, with the credentials docker
// login wrote for its registry (none when there are none).
func (m images) Push(ctx context.Context, source, ref string, progress io.Writer) error {
	if err := m.d.api.ImageTag(ctx, source, ref); err != nil {
		return fmt.Errorf("tag %s as %s: %w", source, ref, sdkErr(err))
	}
	auth, err := registryAuth(registryOf(ref))
	if err != nil {
		return err
	}
	r, err := m.d.api.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, sdkErr(err))
	}
	defer r.Close()
	return pushProgress(r, ref, progress)
}

// pushProgress reads the engine's messages of a push: a line for each
// step that is done, and the error that ends it.
func pushProgress(r io.Reader, ref string, progress io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var msg engineMessage
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		if msg.Error != "" {
			return usererr.New("push %s: %s", ref, strings.TrimSpace(msg.Error)).
				Hint("docker login %s gives the engine the registry's credentials; a registry served over plain HTTP must be in the engine's insecure-registries (localhost is)", registryOf(ref))
		}
		if progress != nil && msg.Status != "" && !strings.HasPrefix(msg.Status, "Pushing") && !strings.HasPrefix(msg.Status, "Preparing") && !strings.HasPrefix(msg.Status, "Waiting") {
			if msg.ID != "" {
				fmt.Fprintf(progress, "%s: %s\n", msg.ID, msg.Status)
			} else {
				fmt.Fprintln(progress, msg.Status)
			}
		}
	}
}

// engineMessage is one of the JSON messages an engine streams while it
// loads or pushes an image.
type engineMessage struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// registryOf is the registry host of an image reference ("docker.io"
// when it names none).
func registryOf(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if !found || !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io"
	}
	return first
}

// registryAuth is the X-Registry-Auth of a registry from the Docker
// client's config (DOCKER_CONFIG, else ~/.docker): the credentials docker
// login stored in it. A registry whose credentials a credential helper
// keeps is refused with what to do; one with none gets an empty
// authorisation (an open registry).
func registryAuth(host string) (string, error) {
	dir, err := cliConfigDir()
	if err != nil {
		return "", nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", nil
	}
	var cfg struct {
		Auths       map[string]struct{ Auth string } `json:"auths"`
		CredsStore  string                           `json:"credsStore"`
		CredHelpers map[string]string                `json:"credHelpers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("docker config %s: %w", filepath.Join(dir, "config.json"), err)
	}
	keys := []string{host, "https://" + host}
	if host == "docker.io" {
		keys = append(keys, "https://index.docker.io/v1/")
	}
	for _, k := range keys {
		a, ok := cfg.Auths[k]
		if !ok {
			continue
		}
		if a.Auth == "" {
			break // kept by a credential helper
		}
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		user, pass, ok := strings.Cut(string(raw), ":")
		if err != nil || !ok {
			return "", fmt.Errorf("docker config: the credentials for %s cannot be read", host)
		}
		return registry.EncodeAuthConfig(registry.AuthConfig{Username: user, Password: pass, ServerAddress: host})
	}
	if helper := cfg.CredHelpers[host]; helper != "" || cfg.CredsStore != "" && hasKey(cfg.Auths, keys) {
		return "", usererr.New("the credentials for %s are kept by a docker credential helper, which git sandbox does not run", host).
			Hint("push it yourself: docker push (git sandbox image push prints the tag it made), or log in without a helper")
	}
	return "", nil
}

func hasKey[V any](m map[string]V, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
