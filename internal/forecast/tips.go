package forecast

import (
	"context"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/rescue"
)

// Candidate is a sandbox as the forecast reads it from its refs.
type Candidate struct {
	Name, BaseRef, Baseline string
	// RescueRef and BaselineRef are its newest snapshot's and its
	// baseline's refs.
	RescueRef, BaselineRef string
}

// FromTips forecasts every candidate's conflicts with its base's tip and
// with the others from their newest snapshots: tips are the refs
// rescue.ReadTips read (the snapshots, the baselines and, when it was
// asked for them, the bases); what they lack is read with one cat-file.
func FromTips(ctx context.Context, o Options, tips map[string]rescue.Tip, sbs []Candidate) (map[string]*Result, error) {
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
		if t, ok := tips[sb.BaseRef]; ok && t.Tree != "" {
			heads[sb.BaseRef] = gitcmd.Hash(t.Tree)
		} else if _, ok := baseAt[sb.BaseRef]; !ok && sb.BaseRef != "" {
			baseAt[sb.BaseRef] = len(revs)
			revs = append(revs, sb.BaseRef+"^{tree}")
		}
		blAt[k] = -1
		if t, ok := tips[sb.BaselineRef]; !ok || t.ID != sb.Baseline || t.Tree == "" {
			blAt[k] = len(revs)
			revs = append(revs, sb.Baseline+"^{tree}")
		}
	}
	var ids []gitcmd.Hash
	if len(revs) > 0 {
		var err error
		if ids, err = o.Git.RevParseEach(ctx, revs...); err != nil {
			return nil, err
		}
	}
	for ref, i := range baseAt {
		if ids[i] != "" {
			heads[ref] = ids[i]
		}
	}
	var list []Sandbox
	for k, sb := range sbs {
		blTree := gitcmd.Hash(tips[sb.BaselineRef].Tree)
		if blAt[k] >= 0 {
			blTree = ids[blAt[k]]
		}
		t, ok := tips[sb.RescueRef]
		if !ok || t.Tree == "" || blTree == "" {
			continue
		}
		list = append(list, Sandbox{
			Name: sb.Name, BaseRef: sb.BaseRef,
			Baseline: gitcmd.Hash(sb.Baseline), BaselineTree: blTree, Final: gitcmd.Hash(t.Tree),
		})
	}
	o.Tips = heads
	return Compute(ctx, o, list)
}
