package mcp

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// jsonBlock is v as JSON in a block: answers that are all data about the
// sandboxes, with the agents' file names and reports inside.
func jsonBlock(what string, v any) (result, error) {
	j, err := jsonText(v)
	if err != nil {
		return result{}, err
	}
	return result{Untrusted: &block{What: what, Body: j, Limit: 256 << 10}}, nil
}

func (s *Server) list(ctx context.Context, _ *sdk.CallToolRequest, _ noIn) (result, error) {
	list, err := s.env.Statuses(ctx)
	if err != nil {
		return result{}, err
	}
	if list == nil {
		list = []sandbox.Status{}
	}
	return jsonBlock("a JSON array, one object per sandbox as git sandbox ps --json prints it; its paths, usage and forecasts come from the agents", list)
}

func (s *Server) status(ctx context.Context, _ *sdk.CallToolRequest, in branchIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	list, err := s.env.Statuses(ctx)
	if err != nil {
		return result{}, err
	}
	for _, st := range list {
		if st.Branch == sb.Branch {
			return jsonBlock(fmt.Sprintf("sandbox %s's row of git sandbox ps --json; its paths, usage and forecast come from the agents", sb.Display()), st)
		}
	}
	return result{}, sandbox.ErrNotFound
}

type logsIn struct {
	Branch string `json:"branch" jsonschema:"the sandbox's branch"`
	Tail   int    `json:"tail,omitempty" jsonschema:"how many of the last lines (default 200, at most 10000)"`
}

// tailBuffer keeps at most the last max bytes written to it (the cap of
// what a block shows, before escaping), whatever the agent printed.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// logTail is the last lines of a sandbox's output, stdout and stderr
// together as they came.
func (s *Server) logTail(ctx context.Context, sb *sandbox.Sandbox, lines int) (string, error) {
	if lines <= 0 {
		lines = 200
	}
	lines = min(lines, 10000)
	buf := &tailBuffer{max: defaultLimit}
	if err := sb.Logs(ctx, false, strconv.Itoa(lines), buf, buf); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (s *Server) logs(ctx context.Context, _ *sdk.CallToolRequest, in logsIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	text, err := s.logTail(ctx, sb, in.Tail)
	if err != nil {
		return result{}, err
	}
	return result{Untrusted: &block{What: fmt.Sprintf("the output of the agent in sandbox %s", sb.Display()), Body: text, KeepEnd: true}}, nil
}

func (s *Server) net(_ context.Context, _ *sdk.CallToolRequest, in branchIn) (result, error) {
	sb, err := s.env.Find(in.Branch)
	if err != nil {
		return result{}, err
	}
	if sb.Egress == nil {
		return result{}, usererr.New("sandbox %s has no egress proxy: its network is %s", sb.Display(), sb.Network()).
			Hint("the decision log exists in allowlist mode, the default for new sandboxes")
	}
	sum, err := netlog.SummarizeFile(sb.NetLog())
	if err != nil {
		return result{}, err
	}
	if sum.Hosts == nil {
		sum.Hosts = []netlog.HostSummary{}
	}
	return jsonBlock(fmt.Sprintf("what the agent in sandbox %s tried to reach through its egress proxy, per host (the host names are the agent's)", sb.Display()), sum)
}

type rescueIn struct {
	Branch string `json:"branch,omitempty" jsonschema:"only this sandbox's snapshots"`
}

func (s *Server) rescueList(ctx context.Context, _ *sdk.CallToolRequest, in rescueIn) (result, error) {
	list, err := rescue.List(ctx, s.env.Git(), in.Branch)
	if err != nil {
		return result{}, err
	}
	if list == nil {
		list = []rescue.Snapshot{}
	}
	return jsonBlock("a JSON array of snapshots, newest first, as git sandbox rescue list --json prints it; the paths in it are the agents'", list)
}

func (s *Server) conflicts(ctx context.Context, _ *sdk.CallToolRequest, _ noIn) (result, error) {
	list, err := s.env.Statuses(ctx)
	if err != nil {
		return result{}, err
	}
	return jsonBlock("a JSON array, one object per sandbox as git sandbox conflicts --json prints it: the paths that would conflict with its base's tip (base) and with other sandboxes (with); the paths are the agents'", sandbox.ForecastRows(list))
}
