package servicejson

// levenshtein is the edit distance between a and b counted in bytes, which
// is enough for the ASCII keys and codes it compares.
func levenshtein(a, b string) int {
	if len(a) < len(b) {
		a, b = b, a
	}
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

// closest returns the candidate nearest to s, if it is near enough to be a
// plausible typo: at most 2 edits, or a quarter of the length for long
// strings (a dotted path). Ties go to the earlier candidate, so callers pass
// a sorted list to get a stable answer.
func closest(s string, candidates []string) (string, bool) {
	if len(s) > 128 {
		// A long key is no typo of ours, and the quadratic distance would
		// only burn time on hostile input.
		return "", false
	}
	best, bestD := "", -1
	for _, c := range candidates {
		d := levenshtein(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len(s)/4) || bestD >= len(s) {
		return "", false
	}
	return best, true
}

// Closest returns the candidate nearest to s by edit distance when it is
// near enough to be a typo of it (as for keys and codes): processors use it
// to suggest a feature name for a misspelled record key.
func Closest(s string, candidates []string) (string, bool) { return closest(s, candidates) }
