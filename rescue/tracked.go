package rescue

// What the agent tracks, as a snapshot needs it: read from the agent's
// index (and its HEAD's tree) only when one of them changed, and kept
// beside the private index in between. Parsing an index of 100,000 entries
// costs more than a whole snapshot with nothing changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"sort"

	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// agentView is what snapshots use of what the agent tracks.
type agentView struct {
	// Key names the agent's index and HEAD the view was made from.
	Key string `json:"key"`
	// Complete is false when only the gitlinks are known (no agent
	// repository yet, or an empty one): every path of the private index
	// then counts as tracked.
	Complete bool `json:"complete"`
	// Gitlinks are the agent's submodules, recorded as it tracks them.
	Gitlinks []agentrepo.IndexEntry `json:"gitlinks,omitempty"`
	// Missing are tracked paths the private index lacked after the last
	// snapshot: files git add --all leaves out because they are ignored
	// (the agent's git add -f), and tracked files that were gone. Each
	// snapshot stages those that are plain files again.
	Missing []string `json:"missing,omitempty"`
	// Tree is the tree the private index held when the view was saved
	// (after the snapshot's write-tree): a snapshot that stages nothing
	// answers it without writing the tree again.
	Tree string `json:"tree,omitempty"`

	// paths are the tracked paths, sorted (no gitlinks); loaded from
	// the paths file only when a snapshot needs them.
	paths  []string
	loaded bool
	// fresh is set when the view was made anew by this snapshot.
	fresh bool
}

func (s *Local) viewFile() string  { return s.Index + ".agent" }
func (s *Local) pathsFile() string { return s.Index + ".agent-paths" }

// forgetView drops the kept view, so the next snapshot makes it anew (the
// private index was replaced or rewritten by something else).
func (s *Local) forgetView() {
	_ = os.Remove(s.viewFile())
	_ = os.Remove(s.pathsFile())
}

// viewKey names the agent's index and HEAD as they are now.
// A key whose head was in the user's store is answered without asking
// again (kept is the key of the kept view): a commit there stays there.
func (s *Local) viewKey(ctx context.Context, head, kept string) string {
	if s.AgentGitDir == "" {
		return "start " + s.Start
	}
	stamp, err := agentrepo.IndexStamp(s.AgentGitDir)
	if err != nil {
		stamp = "error " + err.Error()
	}
	if key := "index " + stamp + " head " + head; key == kept {
		return key
	}
	if head != "" && !s.hasCommit(ctx, head) {
		head = "absent " + head
	}
	return "index " + stamp + " head " + head
}

// agentView returns the view of what the agent tracks: the kept one when
// neither the agent's index nor its HEAD changed since, else one made
// from them (and kept).
func (s *Local) agentView(ctx context.Context, head string) (*agentView, error) {
	var kept agentView
	if b, err := os.ReadFile(s.viewFile()); err == nil && json.Unmarshal(b, &kept) != nil {
		kept = agentView{}
	}
	key := s.viewKey(ctx, head, kept.Key)
	if kept.Key == key {
		return &kept, nil
	}
	tr := s.agentTracked(ctx, head)
	v := &agentView{Key: key, Complete: tr.complete, loaded: true, fresh: true}
	for _, e := range tr.entries {
		if e.Mode == "160000" {
			v.Gitlinks = append(v.Gitlinks, e)
		} else {
			v.paths = append(v.paths, e.Path)
		}
	}
	slices.Sort(v.paths)
	v.paths = slices.Compact(v.paths)
	var buf bytes.Buffer
	for _, p := range v.paths {
		buf.WriteString(p)
		buf.WriteByte(0)
	}
	if err := writeFileAtomic(s.pathsFile(), buf.Bytes()); err != nil {
		return nil, err
	}
	return v, nil
}

// save keeps the view for the next snapshot.
func (s *Local) saveView(v *agentView) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.viewFile(), b)
}

// trackedPaths returns the agent's tracked paths, sorted.
func (s *Local) trackedPaths(v *agentView) []string {
	if v.loaded {
		return v.paths
	}
	v.loaded = true
	b, err := os.ReadFile(s.pathsFile())
	if err != nil {
		return nil
	}
	v.paths = gitcmd.SplitLines(b)
	return v.paths
}

// tracks reports whether the agent tracks p (a file, not a gitlink).
// inIndex says whether the private index holds p: without the agent's
// list, that is what counts.
func (s *Local) tracks(v *agentView, p string, inIndex bool) bool {
	if !v.Complete {
		return inIndex
	}
	paths := s.trackedPaths(v)
	i := sort.SearchStrings(paths, p)
	return i < len(paths) && paths[i] == p
}

// findMissing sets v.Missing to the tracked paths the private index lacks
// (one sorted walk of both lists).
func (s *Local) findMissing(ctx context.Context, g *gitcmd.Runner, v *agentView) error {
	v.Missing = nil
	paths := s.trackedPaths(v)
	if !v.Complete || len(paths) == 0 {
		return nil
	}
	out, err := g.Run(ctx, nil, "ls-files", "-z", "--cached")
	if err != nil {
		return err
	}
	have := gitcmd.SplitLines(out)
	// The index sorts by bytes, as Go compares strings.
	i := 0
	for _, p := range paths {
		for i < len(have) && have[i] < p {
			i++
		}
		if i < len(have) && have[i] == p {
			continue
		}
		if agentrepo.CheckPath(p) == nil {
			v.Missing = append(v.Missing, p)
		}
	}
	return nil
}

// writeFileAtomic replaces path with b: written beside it, then renamed.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		_ = os.Remove(tmp) // a full disk leaves no half file behind
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
