package yamlconf

// Suggest returns the name of known nearest to s, when it is near enough
// to be a misspelling (an edit distance of at most a third of its length,
// and at least 1), or "".
func Suggest(s string, known []string) string {
	best, bestD := "", 0
	for _, k := range known {
		d := distance(s, k)
		if limit := max(1, len(k)/3); d > limit {
			continue
		}
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Damerau–Levenshtein distance (optimal string alignment)
// between a and b: insertions, deletions, substitutions and swaps of two
// neighbouring bytes each count one.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
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
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
