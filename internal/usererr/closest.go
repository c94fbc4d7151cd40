package usererr

// Closest returns the candidate a mistyped name most likely meant: the
// one fewest single-character edits away, when that is at most a third
// of the name's length (and at most 3); "" when none is that close.
func Closest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	limit := min(3, max(1, len([]rune(name))/3))
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := distance([]rune(name), []rune(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
