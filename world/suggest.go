package world

import "strings"

// Closest returns the name of known nearest to name by edit distance
// (insertions, deletions, substitutions and swaps of two neighbouring
// characters, compared case-insensitively), or "" when none is near enough
// to be a likely typo: at most 2 edits, and fewer than half of name's
// length. Ties go to the earlier entry of known.
func Closest(name string, known []string) string {
	n := strings.ToLower(name)
	best, bestD := "", -1
	for _, k := range known {
		d := editDistance(n, strings.ToLower(k))
		if d == 0 {
			return k
		}
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > 2 || 2*bestD >= len([]rune(n)) {
		return ""
	}
	return best
}

// didYouMean is Closest as a message suffix: ` (did you mean "x"?)` or "".
func didYouMean(name string, known []string) string {
	if c := Closest(name, known); c != "" && c != name {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}

// DidYouMean is didYouMean for other packages' diagnostics.
func DidYouMean(name string, known []string) string { return didYouMean(name, known) }

// editDistance is the optimal string alignment distance of a and b (rune
// based). Inputs are names of at most a few dozen characters; longer
// inputs are compared on their first 128 runes, which bounds the work.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 128 {
		ra = ra[:128]
	}
	if len(rb) > 128 {
		rb = rb[:128]
	}
	// Three rows: two back (for swaps), previous, current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
