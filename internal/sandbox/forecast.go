package sandbox

import (
	"context"

	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// forecast predicts every sandbox's conflicts with its base's tip and with
// the other sandboxes, from their newest snapshots (see package forecast).
// tips are the rescue refs' tips as rescueTips read them.
// partial says sbs are not all of the repository's sandboxes.
func (e *Env) forecast(ctx context.Context, sbs []*Sandbox, tips map[string]tip, partial bool) (map[string]*forecast.Result, error) {
	if len(sbs) == 0 {
		return nil, nil
	}
	var revs []string
	baseAt := map[string]int{}
	blAt := make([]int, len(sbs))
	for k, sb := range sbs {
		if _, ok := baseAt[sb.BaseRef]; !ok && sb.BaseRef != "" {
			baseAt[sb.BaseRef] = len(revs)
			revs = append(revs, sb.BaseRef+"^{tree}")
		}
		blAt[k] = len(revs)
		revs = append(revs, sb.Baseline+"^{tree}")
	}
	ids, err := e.Git().RevParseEach(ctx, revs...)
	if err != nil {
		return nil, err
	}
	heads := map[string]gitcmd.Hash{}
	for ref, i := range baseAt {
		if ids[i] != "" {
			heads[ref] = ids[i]
		}
	}
	var list []forecast.Sandbox
	for k, sb := range sbs {
		blTree := ids[blAt[k]]
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
