package sandbox

import (
	"context"

	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// forecast predicts every sandbox's conflicts with its base's tip and with
// the other sandboxes, from their newest snapshots (see package forecast).
// tips are the refs rescueTips read: the snapshots, the baselines and,
// when it was asked for them, the bases; what they lack is read with one
// cat-file.
// partial says sbs are not all of the repository's sandboxes.
func (e *Env) forecast(ctx context.Context, sbs []*Sandbox, tips map[string]tip, partial bool) (map[string]*forecast.Result, error) {
	if len(sbs) == 0 {
		return nil, nil
	}
	// Trees from the refs already read: a base's tip, a baseline whose ref
	// still names the recorded commit. The rest are asked for.
	var revs []string
	baseAt := map[string]int{}
	blAt := make([]int, len(sbs))
	heads := map[string]gitcmd.Hash{}
	for k, sb := range sbs {
		if t, ok := tips[sb.BaseRef]; ok && t.tree != "" {
			heads[sb.BaseRef] = gitcmd.Hash(t.tree)
		} else if _, ok := baseAt[sb.BaseRef]; !ok && sb.BaseRef != "" {
			baseAt[sb.BaseRef] = len(revs)
			revs = append(revs, sb.BaseRef+"^{tree}")
		}
		blAt[k] = -1
		if t, ok := tips[sb.Refs().Baseline()]; !ok || t.id != sb.Baseline || t.tree == "" {
			blAt[k] = len(revs)
			revs = append(revs, sb.Baseline+"^{tree}")
		}
	}
	var ids []gitcmd.Hash
	if len(revs) > 0 {
		var err error
		if ids, err = e.Git().RevParseEach(ctx, revs...); err != nil {
			return nil, err
		}
	}
	for ref, i := range baseAt {
		if ids[i] != "" {
			heads[ref] = ids[i]
		}
	}
	var list []forecast.Sandbox
	for k, sb := range sbs {
		blTree := gitcmd.Hash(tips[sb.Refs().Baseline()].tree)
		if blAt[k] >= 0 {
			blTree = ids[blAt[k]]
		}
		t, ok := tips[sb.Refs().Rescue()]
		if !ok || t.tree == "" || blTree == "" {
			continue
		}
		list = append(list, forecast.Sandbox{
			Name: sb.Branch, BaseRef: sb.BaseRef,
			Baseline: gitcmd.Hash(sb.Baseline), BaselineTree: blTree, Final: gitcmd.Hash(t.tree),
		})
	}
	return forecast.Compute(ctx, forecast.Options{Git: e.Git(), Tips: heads, CacheFile: e.Layout.ForecastCache(), Partial: partial}, list)
}
