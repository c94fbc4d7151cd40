package sandbox

import (
	"context"

	"github.com/git-sandbox/git-sandbox/internal/forecast"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// forecast predicts every sandbox's conflicts with its base's tip and with
// the other sandboxes, from their newest snapshots (forecast.FromTips).
// partial says sbs are not all of the repository's sandboxes.
func (e *Env) forecast(ctx context.Context, sbs []*Sandbox, tips map[string]rescue.Tip, partial bool) (map[string]*forecast.Result, error) {
	list := make([]forecast.Candidate, len(sbs))
	for i, sb := range sbs {
		refs := sb.Refs()
		list[i] = forecast.Candidate{
			Name: sb.Branch, BaseRef: sb.BaseRef, Baseline: sb.Baseline,
			RescueRef: refs.Rescue(), BaselineRef: refs.Baseline(),
		}
	}
	return forecast.FromTips(ctx, forecast.Options{Git: e.Git(), CacheFile: e.Layout.ForecastCache(), Partial: partial}, tips, list)
}
