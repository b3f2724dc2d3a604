// Package suggest finds the known word a mistyped one was meant to be: the
// flag, config key or command closest to it, for "did you mean …?" hints.
package suggest

import "strings"

// Closest returns the candidate nearest to word, or "" when none is near
// enough to be a likely typo. Near enough: an edit distance (Levenshtein,
// case-insensitive, counting a swap of two neighbours as one edit) of at
// most 2, or a third of word's length for longer words, or a candidate
// that starts with word (a name cut short, at least 3 characters). Ties go
// to the first candidate.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", -1
	limit := max(2, len([]rune(w))/3)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == w {
			return c
		}
		d := Distance(w, lc)
		if d > limit && !(len([]rune(w)) >= 3 && strings.HasPrefix(lc, w)) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the optimal string alignment distance between a and b, in
// runes: insertions, deletions, substitutions and swaps of two adjacent
// runes each cost one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: two back (for swaps), the previous and the current.
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
