package mcp

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Resources: each sandbox's log and diff, sandbox://BRANCH/log and
// sandbox://BRANCH/diff (the branch percent-encoded where a URI needs it,
// its slashes kept).
const (
	scheme     = "sandbox://"
	logSuffix  = "/log"
	diffSuffix = "/diff"
)

// ResourceURI is the URI of a sandbox's log (kind "log") or diff ("diff").
func ResourceURI(branch, kind string) string {
	var b strings.Builder
	b.WriteString(scheme)
	for _, c := range []byte(branch) {
		if c == '/' || c == '-' || c == '.' || c == '_' || c == '~' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String() + "/" + kind
}

// parseURI returns the branch and kind a resource URI names.
func parseURI(uri string) (branch, kind string, ok bool) {
	rest, ok := strings.CutPrefix(uri, scheme)
	if !ok {
		return "", "", false
	}
	for _, suffix := range []string{logSuffix, diffSuffix} {
		if b, found := strings.CutSuffix(rest, suffix); found && b != "" {
			branch, err := url.PathUnescape(b)
			return branch, suffix[1:], err == nil
		}
	}
	return "", "", false
}

// addResources adds the two templates every sandbox's resources match.
func (s *Server) addResources() {
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "sandbox log", URITemplate: scheme + "{+branch}" + logSuffix, MIMEType: "text/plain",
		Description: "The last lines a sandbox's agent printed." + untrustedNote,
	}, s.readResource)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "sandbox diff", URITemplate: scheme + "{+branch}" + diffSuffix, MIMEType: "text/plain",
		Description: "A sandbox's change from its baseline to its newest snapshot (taken every rescue.interval while the agent runs); sandbox_diff takes a fresh one." + untrustedNote,
	}, s.readResource)
}

// listResources makes the concrete resources listed match the sandboxes
// that exist: a log and a diff for each.
func (s *Server) listResources(branches []string) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	now := map[string]bool{}
	for _, b := range branches {
		now[b] = true
		if s.listed[b] {
			continue
		}
		s.listed[b] = true
		for _, kind := range []string{"log", "diff"} {
			uri := ResourceURI(b, kind)
			if _, err := url.Parse(uri); err != nil {
				continue // readable through the template all the same
			}
			s.srv.AddResource(&sdk.Resource{
				Name: termsafe.String(b) + " " + kind, URI: uri, MIMEType: "text/plain",
				Description: fmt.Sprintf("The %s of sandbox %s.%s", kind, termsafe.String(b), untrustedNote),
			}, s.readResource)
		}
	}
	for b := range s.listed {
		if !now[b] {
			delete(s.listed, b)
			s.srv.RemoveResources(ResourceURI(b, "log"), ResourceURI(b, "diff"))
		}
	}
}

// readResource reads a sandbox's log or diff.
func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	branch, kind, ok := parseURI(uri)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	sb, err := s.env.Find(branch)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	var text string
	if kind == "log" {
		text, err = s.logText(ctx, sb)
	} else {
		text, err = s.diffText(ctx, sb)
	}
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
}

// logText is the log resource: the output's last 500 lines, framed.
func (s *Server) logText(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	out, err := s.logTail(ctx, sb, 500)
	if err != nil {
		return "", err
	}
	return block{What: fmt.Sprintf("the output of the agent in sandbox %s", sb.Display()), Body: out, KeepEnd: true}.frame().Text, nil
}

// diffText is the diff resource: baseline to the newest snapshot, framed,
// with no snapshot taken (reading a resource changes nothing).
func (s *Server) diffText(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	tip, err := s.env.Git().RevParse(ctx, sb.Refs().Rescue())
	if err != nil {
		return fmt.Sprintf("sandbox %s has no snapshot yet", sb.Display()), nil
	}
	text, n, err := s.reviewText(ctx, &reviewView{sb: sb, to: tip.String()})
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf("sandbox %s: %d file(s) changed from its baseline to its newest snapshot %s; sandbox_diff takes a fresh snapshot and names the tree to land.\n",
		sb.Display(), n.files, gitcmd.Hash(tip).Short())
	if n.files == 0 {
		return head, nil
	}
	return head + block{What: fmt.Sprintf("what landing sandbox %s's newest snapshot would apply", sb.Display()), Body: text, Limit: maxPatch}.frame().Text, nil
}
