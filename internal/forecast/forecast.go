// Package forecast predicts merge conflicts among a repository's live
// sandboxes: for each one, whether landing it now would conflict with its
// base branch's tip, and which other sandboxes on the same base it would
// conflict with if both landed.
//
// Every prediction is a `git merge-tree --write-tree` of two throwaway
// commits whose only parent is the merge base land would use (the
// sandbox's baseline), exactly as land merges: git 2.39 has no
// `merge-tree --merge-base`, and a single shared parent forces the base on
// every version. The throwaway commits carry a fixed author, committer and
// date, so a commit is a pure function of (tree, parent) and its id is
// computed here without running git; the pair of ids is the cache key. A
// warm cache therefore answers with no git process at all; a cold one
// writes only the commits it needs (one `hash-object` process), rules out
// pairs whose changed paths cannot meet (one `diff-tree --stdin` process
// for all of them), and runs the remaining merges in parallel.
package forecast

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// BaseName is the name Result.Names gives the base branch's tip.
const BaseName = "base"

// Sandbox is one live sandbox, as far as a forecast needs it.
type Sandbox struct {
	// Name is the sandbox's branch.
	Name string
	// BaseRef is the full ref it lands on.
	BaseRef string
	// Baseline is the baseline snapshot commit (the merge base of every
	// merge) and BaselineTree its tree.
	Baseline, BaselineTree gitcmd.Hash
	// Final is the tree of its newest snapshot: what would land now.
	Final gitcmd.Hash
}

// changed reports whether the sandbox has anything to land.
func (s *Sandbox) changed() bool { return s.Final != "" && s.Final != s.BaselineTree }

// Options describe a forecast.
type Options struct {
	// Git is the user's repository. Throwaway commits and merged trees are
	// written into its object store, as land writes them.
	Git *gitcmd.Runner
	// Tips maps a base ref to its tip's tree; a sandbox whose base is
	// missing gets no base forecast.
	Tips map[string]gitcmd.Hash
	// CacheFile keeps results between runs ("" keeps none).
	CacheFile string
	// Workers is how many merges run at once (default: the CPUs).
	Workers int
	// Partial says the sandboxes are some of the live ones: the cached
	// results of the others are kept (a full run drops what it did not
	// use).
	Partial bool
}

// Result is one sandbox's forecast.
type Result struct {
	// Base lists the paths that conflict with the base branch's tip.
	Base []string `json:"base,omitempty"`
	// With lists, per other sandbox, the paths that would conflict if both
	// landed.
	With map[string][]string `json:"with,omitempty"`
}

// Conflicts reports whether anything conflicts.
func (r *Result) Conflicts() bool { return r != nil && (len(r.Base) > 0 || len(r.With) > 0) }

// Column is the CONFLICTS column of ps and dash: "base" and the other
// sandboxes (escaped for printing), "-" for none, "?" when no forecast
// could be made (r is nil).
func (r *Result) Column() string {
	if r == nil {
		return "?"
	}
	names := r.Names()
	if len(names) == 0 {
		return "-"
	}
	for i, n := range names {
		names[i] = termsafe.String(n)
	}
	return strings.Join(names, ",")
}

// Names lists what the sandbox conflicts with: BaseName first, then the
// other sandboxes in order.
func (r *Result) Names() []string {
	if r == nil {
		return nil
	}
	var out []string
	if len(r.Base) > 0 {
		out = append(out, BaseName)
	}
	others := make([]string, 0, len(r.With))
	for n := range r.With {
		others = append(others, n)
	}
	sort.Strings(others)
	return append(out, others...)
}

// entry is a cached merge result: the merged tree of a clean merge, or the
// conflicting paths.
type entry struct {
	Tree  gitcmd.Hash `json:"tree,omitempty"`
	Paths []string    `json:"paths,omitempty"`
}

// job is one merge of ours and theirs, two throwaway commits with the same
// single parent.
type job struct {
	ours, theirs   commit
	oursT, theirsT gitcmd.Hash // their trees, for the path filter
	baseT          gitcmd.Hash // the parent's tree
	// pair jobs may be settled by paths; base jobs need the merged tree.
	pair bool
	res  entry
	done bool
}

func (j *job) key() string { return j.ours.id.String() + " " + j.theirs.id.String() }

// Compute forecasts every sandbox's conflicts; sandboxes with nothing to
// land get an empty result.
func Compute(ctx context.Context, o Options, sbs []Sandbox) (map[string]*Result, error) {
	out := make(map[string]*Result, len(sbs))
	for _, s := range sbs {
		out[s.Name] = &Result{}
	}
	format := changedFormat(sbs)
	if format == "" {
		return out, nil
	}
	c := loadCache(o.CacheFile)
	r := &runner{o: o, cache: c, format: format}
	merged, err := r.forecastBase(ctx, sbs, out)
	if err != nil {
		return nil, err
	}
	if err := r.forecastPairs(ctx, sbs, merged, out); err != nil {
		return nil, err
	}
	if o.CacheFile != "" {
		if err := c.save(o.CacheFile, o.Partial); err != nil {
			return out, fmt.Errorf("forecast cache: %w", err)
		}
	}
	return out, nil
}

// changedFormat is the object format of the first sandbox with something
// to land, or "" when none has anything.
func changedFormat(sbs []Sandbox) string {
	for _, s := range sbs {
		if s.changed() {
			return objectFormat(s.Baseline)
		}
	}
	return ""
}

// forecastBase merges each sandbox's change onto its base's tip, records
// the conflicting paths in out, and returns the tree each clean merge
// would leave on the base, by sandbox.
func (r *runner) forecastBase(ctx context.Context, sbs []Sandbox, out map[string]*Result) (map[string]gitcmd.Hash, error) {
	baseJobs := map[string]*job{}
	merged := map[string]gitcmd.Hash{}
	var jobs []*job
	for i := range sbs {
		s := &sbs[i]
		tip, ok := r.o.Tips[s.BaseRef]
		if !s.changed() || !ok {
			continue
		}
		if tip == s.BaselineTree {
			merged[s.Name] = s.Final
			continue
		}
		j := r.newJob(s.Baseline, s.BaselineTree, tip, s.Final)
		baseJobs[s.Name] = j
		jobs = append(jobs, j)
	}
	if err := r.run(ctx, jobs); err != nil {
		return nil, err
	}
	for name, j := range baseJobs {
		switch {
		case len(j.res.Paths) > 0:
			out[name].Base = j.res.Paths
		case j.res.Tree != "":
			merged[name] = j.res.Tree
		}
	}
	return merged, nil
}

// pair is the merge of two sandboxes on the same base, a sorted before b.
type pair struct {
	a, b *Sandbox
	j    *job
}

// forecastPairs merges every two sandboxes on the same base and records
// in out, on both sides, the paths they would conflict on. With one
// baseline the two changes are merged directly; with different baselines
// the second lands onto what the first would leave on the base (merged,
// from forecastBase), and what it conflicts with there that it conflicts
// with on the base alone is the base's, not the pair's.
func (r *runner) forecastPairs(ctx context.Context, sbs []Sandbox, merged map[string]gitcmd.Hash, out map[string]*Result) error {
	pairs := r.pairJobs(sbs, merged)
	jobs := make([]*job, 0, len(pairs))
	for _, p := range pairs {
		jobs = append(jobs, p.j)
	}
	if err := r.run(ctx, jobs); err != nil {
		return err
	}
	for _, p := range pairs {
		paths := p.j.res.Paths
		if p.a.Baseline != p.b.Baseline {
			paths = without(paths, out[p.b.Name].Base)
		}
		if len(paths) == 0 {
			continue
		}
		for _, side := range [][2]*Sandbox{{p.a, p.b}, {p.b, p.a}} {
			res := out[side[0].Name]
			if res.With == nil {
				res.With = map[string][]string{}
			}
			res.With[side[1].Name] = paths
		}
	}
	return nil
}

// pairJobs makes the merge job of every two changed sandboxes on the same
// base (see forecastPairs).
func (r *runner) pairJobs(sbs []Sandbox, merged map[string]gitcmd.Hash) []pair {
	var pairs []pair
	for i := range sbs {
		for k := i + 1; k < len(sbs); k++ {
			a, b := &sbs[i], &sbs[k]
			if a.BaseRef != b.BaseRef || !a.changed() || !b.changed() {
				continue
			}
			if a.Name > b.Name {
				a, b = b, a
			}
			var j *job
			if a.Baseline == b.Baseline {
				j = r.newJob(a.Baseline, a.BaselineTree, a.Final, b.Final)
			} else {
				ours := a.Final
				if t, ok := merged[a.Name]; ok {
					ours = t
				}
				j = r.newJob(b.Baseline, b.BaselineTree, ours, b.Final)
			}
			j.pair = true
			pairs = append(pairs, pair{a, b, j})
		}
	}
	return pairs
}

func without(paths, drop []string) []string {
	if len(drop) == 0 {
		return paths
	}
	var out []string
	for _, p := range paths {
		if !contains(drop, p) {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runner runs jobs against the cache.
type runner struct {
	o      Options
	cache  *cache
	format string
}

func (r *runner) newJob(parent, parentTree, ours, theirs gitcmd.Hash) *job {
	return &job{
		ours:   newCommit(r.format, ours, parent),
		theirs: newCommit(r.format, theirs, parent),
		oursT:  ours, theirsT: theirs, baseT: parentTree,
	}
}

// run answers every job: from the cache, from the path filter, or by
// merging.
func (r *runner) run(ctx context.Context, jobs []*job) error {
	var todo []*job
	for _, j := range jobs {
		if e, ok := r.cache.get(j.key()); ok {
			j.res, j.done = e, true
			continue
		}
		todo = append(todo, j)
	}
	if len(todo) == 0 {
		return nil
	}
	if err := r.filter(ctx, todo); err != nil {
		return err
	}
	var merges []*job
	for _, j := range todo {
		if !j.done {
			merges = append(merges, j)
		}
	}
	if len(merges) > 0 {
		if err := r.writeCommits(ctx, merges); err != nil {
			return err
		}
		if err := r.merge(ctx, merges); err != nil {
			return err
		}
	}
	for _, j := range todo {
		r.cache.put(j.key(), j.res)
	}
	return nil
}

// filter settles the jobs whose two sides change paths that cannot meet:
// a merge conflicts only where both sides touch one path, one side's path
// is a directory of the other's, or (directory renames) one side deletes
// from a directory the other touches. The tree of such a merge is not
// needed: only pair jobs, whose tree nobody reads, are settled here.
func (r *runner) filter(ctx context.Context, jobs []*job) error {
	want := map[[2]gitcmd.Hash]bool{}
	var order [][2]gitcmd.Hash
	add := func(a, b gitcmd.Hash) {
		k := [2]gitcmd.Hash{a, b}
		if a != b && !want[k] {
			want[k] = true
			order = append(order, k)
		}
	}
	for _, j := range jobs {
		if j.pair {
			add(j.baseT, j.oursT)
			add(j.baseT, j.theirsT)
		}
	}
	diffs, err := diffTrees(ctx, r.o.Git, order)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		ours, theirs := diffs[[2]gitcmd.Hash{j.baseT, j.oursT}], diffs[[2]gitcmd.Hash{j.baseT, j.theirsT}]
		switch {
		case j.oursT == j.baseT || j.oursT == j.theirsT:
			j.res, j.done = entry{Tree: j.theirsT}, true
		case j.theirsT == j.baseT:
			j.res, j.done = entry{Tree: j.oursT}, true
		case !mayMeet(ours, theirs):
			// The merged tree is not computed: an empty Tree marks a clean
			// merge settled by paths. Base jobs need the tree, so they are
			// never settled this way.
			if j.pair {
				j.res, j.done = entry{}, true
			}
		}
	}
	return nil
}

// merge runs the jobs' merges, Workers at a time.
func (r *runner) merge(ctx context.Context, jobs []*job) error {
	workers := r.o.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	ch := make(chan *job)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				tree, err := r.o.Git.MergeTree(ctx, gitcmd.MergeTreeRequest{Ours: j.ours.id, Theirs: j.theirs.id})
				if c, ok := errors.AsType[*gitcmd.MergeTreeConflictError](err); ok {
					j.res = entry{Paths: c.Paths}
					if len(c.Paths) == 0 {
						j.res.Paths = []string{"?"}
					}
				} else if err != nil {
					select {
					case errs <- fmt.Errorf("forecast: %w", err):
					default:
					}
					continue
				} else {
					j.res = entry{Tree: tree}
				}
				j.done = true
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// commit is a throwaway commit: its content and the id computed from it.
type commit struct {
	id      gitcmd.Hash
	content []byte
}

// throwawayIdent is the author and committer of every throwaway commit: a
// fixed one makes a commit's id depend only on its tree and parent.
const throwawayIdent = "git-sandbox <git-sandbox@localhost> 0 +0000"

func newCommit(format string, tree, parent gitcmd.Hash) commit {
	content := fmt.Appendf(nil, "tree %s\nparent %s\nauthor %s\ncommitter %s\n\nconflict forecast\n",
		tree, parent, throwawayIdent, throwawayIdent)
	header := "commit " + strconv.Itoa(len(content)) + "\x00"
	var sum []byte
	if format == "sha256" {
		h := sha256.Sum256(append([]byte(header), content...))
		sum = h[:]
	} else {
		h := sha1.Sum(append([]byte(header), content...))
		sum = h[:]
	}
	return commit{id: gitcmd.Hash(hex.EncodeToString(sum)), content: content}
}

// objectFormat tells the hash algorithm from an object name's length.
func objectFormat(h gitcmd.Hash) string {
	if len(h) == 64 {
		return "sha256"
	}
	return "sha1"
}

// writeCommits writes the jobs' throwaway commits with one git process and
// checks that git names them as computed.
func (r *runner) writeCommits(ctx context.Context, jobs []*job) error {
	seen := map[gitcmd.Hash]bool{}
	var list []commit
	for _, j := range jobs {
		for _, c := range []commit{j.ours, j.theirs} {
			if !seen[c.id] {
				seen[c.id] = true
				list = append(list, c)
			}
		}
	}
	dir, err := os.MkdirTemp("", "git-sandbox-forecast-")
	if err != nil {
		return fmt.Errorf("forecast: %w", err)
	}
	defer os.RemoveAll(dir)
	var paths bytes.Buffer
	for i, c := range list {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(p, c.content, 0o600); err != nil {
			return fmt.Errorf("forecast: %w", err)
		}
		paths.WriteString(p + "\n")
	}
	out, err := r.o.Git.Run(ctx, &paths, "hash-object", "-w", "-t", "commit", "--stdin-paths")
	if err != nil {
		return fmt.Errorf("forecast: write commits: %w", err)
	}
	ids := gitcmd.SplitLines(out)
	if len(ids) != len(list) {
		return fmt.Errorf("forecast: git hash-object wrote %d commits of %d", len(ids), len(list))
	}
	for i, c := range list {
		if gitcmd.Hash(ids[i]) != c.id {
			return fmt.Errorf("forecast: git named a throwaway commit %s, not %s", ids[i], c.id)
		}
	}
	return nil
}

// change is one changed path of a tree diff, and whether it was deleted.
type change struct {
	path    string
	deleted bool
}

// diffTrees lists the changed paths of every pair of trees with one
// `git diff-tree --stdin` process.
func diffTrees(ctx context.Context, g *gitcmd.Runner, pairs [][2]gitcmd.Hash) (map[[2]gitcmd.Hash][]change, error) {
	out := make(map[[2]gitcmd.Hash][]change, len(pairs))
	if len(pairs) == 0 {
		return out, nil
	}
	var in bytes.Buffer
	for _, p := range pairs {
		fmt.Fprintf(&in, "%s %s\n", p[0], p[1])
	}
	raw, err := g.Run(ctx, &in, "diff-tree", "--stdin", "-r", "--no-renames", "--name-status", "-z")
	if err != nil {
		return nil, fmt.Errorf("forecast: diff trees: %w", err)
	}
	return parseDiffTrees(raw, pairs)
}

// parseDiffTrees reads `diff-tree --stdin --name-status -z` output: for
// each pair given that differs, a line "<tree> <tree>\n" then NUL-ended
// status and path tokens. The header line is glued to the first status.
func parseDiffTrees(raw []byte, pairs [][2]gitcmd.Hash) (map[[2]gitcmd.Hash][]change, error) {
	out := make(map[[2]gitcmd.Hash][]change, len(pairs))
	tokens := strings.Split(string(raw), "\x00")
	var cur [2]gitcmd.Hash
	for i := 0; i < len(tokens); i++ {
		t := tokens[i]
		if head, status, ok := strings.Cut(t, "\n"); ok {
			f := strings.Fields(head)
			if len(f) != 2 {
				return nil, fmt.Errorf("forecast: diff-tree: bad header %q", head)
			}
			cur = [2]gitcmd.Hash{gitcmd.Hash(f[0]), gitcmd.Hash(f[1])}
			t = status
		}
		if t == "" && i == len(tokens)-1 {
			break
		}
		if i+1 >= len(tokens) || t == "" {
			return nil, fmt.Errorf("forecast: diff-tree: bad output near %q", t)
		}
		i++
		out[cur] = append(out[cur], change{path: tokens[i], deleted: t == "D"})
	}
	return out, nil
}

// mayMeet reports whether two sides' changes could conflict (see filter).
func mayMeet(a, b []change) bool { return reaches(a, b) || reaches(b, a) }

// reaches reports whether a change of b lands on a path of a, on a
// directory holding one of a's paths, under one of a's paths, or in a
// directory a deletes from (where a directory rename might carry it).
func reaches(a, b []change) bool {
	touched := map[string]bool{}
	ancestors := map[string]bool{}
	deletedFrom := map[string]bool{}
	for _, c := range a {
		touched[c.path] = true
		for d := dir(c.path); d != ""; d = dir(d) {
			ancestors[d] = true
		}
		if c.deleted && dir(c.path) != "" {
			deletedFrom[dir(c.path)] = true
		}
	}
	for _, c := range b {
		if touched[c.path] || ancestors[c.path] {
			return true
		}
		for d := dir(c.path); d != ""; d = dir(d) {
			if touched[d] || deletedFrom[d] {
				return true
			}
		}
	}
	return false
}

func dir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// cache holds merge results by the pair of throwaway commits merged.
// Entries not used in a run are dropped when it saves, so the file holds
// only what the live sandboxes need.
type cache struct {
	mu      sync.Mutex
	old     map[string]entry
	used    map[string]entry
	changed bool
}

type cacheFile struct {
	Version int              `json:"version"`
	Merges  map[string]entry `json:"merges"`
}

const cacheVersion = 1

func loadCache(path string) *cache {
	c := &cache{old: map[string]entry{}, used: map[string]entry{}}
	if path == "" {
		return c
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	var f cacheFile
	// A damaged or older cache is recomputed, never trusted.
	if json.Unmarshal(b, &f) == nil && f.Version == cacheVersion && f.Merges != nil {
		c.old = f.Merges
	}
	return c
}

func (c *cache) get(k string) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.old[k]
	if ok {
		c.used[k] = e
	}
	return e, ok
}

func (c *cache) put(k string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used[k] = e
	c.changed = true
}

// save writes the cache atomically when it changed; keep keeps the
// entries this run did not use.
func (c *cache) save(path string, keep bool) error {
	if !c.changed && (keep || len(c.used) == len(c.old)) {
		return nil
	}
	merges := c.used
	if keep {
		merges = make(map[string]entry, len(c.old)+len(c.used))
		for k, e := range c.old {
			merges[k] = e
		}
		for k, e := range c.used {
			merges[k] = e
		}
	}
	b, err := json.Marshal(cacheFile{Version: cacheVersion, Merges: merges})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".forecast-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
