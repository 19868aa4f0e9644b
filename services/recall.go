package services

import (
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Recall ranks an agent's memory entries for a query with Okapi BM25, the
// standard keyword ranking of search engines, written out here because the
// corpus is tiny and already in memory (at most store.MaxMemoryKeys
// entries of one agent, read per call): an index library (bleve, …) would
// add a persistent index to keep in step with the store for no better
// ranking (docs/design.md).
//
//	score(d, q) = Σ_{t ∈ q} idf(t) · f(t,d)·(k1+1) / (f(t,d) + k1·(1 − b + b·|d|/avgdl))
//	idf(t)      = ln(1 + (N − n(t) + 0.5) / (n(t) + 0.5))
//
// with f(t,d) the count of term t in d (its key and value), |d| its length
// in terms, avgdl the mean length, N the number of entries and n(t) the
// number holding t; k1 = 1.2, b = 0.75. A term of the key counts twice: a
// key names what the entry is about.

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// tokenize splits s into lower-case terms: runs of letters and digits.
// Terms of one byte are dropped (noise: "a", "x"), except digits.
func tokenize(s string) []string {
	var out []string
	for f := range strings.FieldsFuncSeq(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if len(f) == 1 && !unicode.IsDigit(rune(f[0])) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// recallDoc is one entry to rank.
type recallDoc struct {
	Key, Text string
}

// recallHit is a ranked entry: its index in the docs and its score.
type recallHit struct {
	Index int
	Score float64
}

// rankBM25 returns the docs that hold at least one query term, best first
// (ties: lower index first), with their BM25 scores. It is pure.
func rankBM25(docs []recallDoc, query string) []recallHit {
	terms := uniq(tokenize(query))
	if len(terms) == 0 || len(docs) == 0 {
		return nil
	}
	tf := make([]map[string]int, len(docs))
	lens := make([]int, len(docs))
	df := map[string]int{}
	total := 0
	for i, d := range docs {
		counts := map[string]int{}
		n := 0
		for _, t := range tokenize(d.Key) {
			counts[t] += 2
			n += 2
		}
		for _, t := range tokenize(d.Text) {
			counts[t]++
			n++
		}
		tf[i], lens[i] = counts, n
		total += n
		for _, t := range terms {
			if counts[t] > 0 {
				df[t]++
			}
		}
	}
	avgdl := float64(total) / float64(len(docs))
	if avgdl == 0 {
		avgdl = 1
	}
	N := float64(len(docs))
	var hits []recallHit
	for i := range docs {
		score := 0.0
		for _, t := range terms {
			f := float64(tf[i][t])
			if f == 0 {
				continue
			}
			n := float64(df[t])
			idf := math.Log(1 + (N-n+0.5)/(n+0.5))
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(lens[i])/avgdl))
		}
		if score > 0 {
			hits = append(hits, recallHit{Index: i, Score: score})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].Score > hits[b].Score })
	return hits
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// excerpt returns at most n bytes of text around the first occurrence of
// one of terms (from the start when none occurs), cut on rune boundaries,
// with "…" marking a cut.
func excerpt(text string, terms []string, n int) string {
	if len(text) <= n {
		return text
	}
	lower := strings.ToLower(text)
	at := -1
	for _, t := range terms {
		if i := strings.Index(lower, t); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if len(lower) != len(text) { // case folding changed the length: positions differ
		at = -1
	}
	start := 0
	if at > n/4 {
		start = at - n/4
	}
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	const mark = "…"
	budget := n - 2*len(mark)
	if budget <= 0 {
		return truncate(text, n)
	}
	end := min(len(text), start+budget)
	for end < len(text) && end > start && !utf8.RuneStart(text[end]) {
		end--
	}
	out := text[start:end]
	if start > 0 {
		out = mark + out
	}
	if end < len(text) {
		out += mark
	}
	return out
}
