package engine

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// The catalog is matched to words, the task's or a search's, by their
// stems: a tool scores the words it shares with the text, each weighed by
// how rare it is among the tools (a word every tool has says nothing of
// which one is meant), three times over when the tool's name has it. Two
// words the catalog writes together in most of their uses (merge request,
// pull request) are one term for the text: else every tool about merge
// requests would count them twice and outrank, for "merge request
// pipelines", the tools about pipelines. One way of matching serves the
// first request's choice and the search, so that a search for the task's
// own words finds what the task would have been offered.

// Where a term of a tool is.
const (
	inName uint8 = 1 << iota
	inDescription
)

// nameWeight is how much more a term in a tool's name counts than one only
// in its description; titleWeight, how much more a term of the task's
// title counts than one only in its description.
const (
	nameWeight  = 3
	titleWeight = 2
)

// wordIndex holds the terms of every tool of a catalog, and how rare each
// term is among them.
type wordIndex struct {
	tools     []map[string]uint8 // by catalog position: term → where it is
	idf       map[string]float64 // term → its weight, ln((tools+1)/tools having it)
	compounds map[string]bool    // "a b": two stems the catalog writes together
}

func newWordIndex(tools []toolhost.Tool) *wordIndex {
	ix := &wordIndex{tools: make([]map[string]uint8, len(tools)), idf: map[string]float64{}, compounds: map[string]bool{}}
	type texts struct{ name, desc []string }
	seqs := make([]texts, len(tools))
	df, pairs := map[string]int{}, map[string]int{}
	for i, t := range tools {
		seqs[i] = texts{stems(t.Server + " " + t.Name), stems(t.Description)}
		seen := map[string]bool{}
		for _, seq := range [][]string{seqs[i].name, seqs[i].desc} {
			for k, s := range seq {
				seen[s] = true
				if k > 0 {
					seen[seq[k-1]+" "+s] = true
				}
			}
		}
		for term := range seen {
			if strings.Contains(term, " ") {
				pairs[term]++
			} else {
				df[term]++
			}
		}
	}
	for pair, n := range pairs {
		a, b, _ := strings.Cut(pair, " ")
		if n >= 2 && 2*n >= max(df[a], df[b]) {
			ix.compounds[pair] = true
			df[pair] = n
		}
	}
	for i, seq := range seqs {
		w := map[string]uint8{}
		for where, seq := range map[uint8][]string{inName: seq.name, inDescription: seq.desc} {
			for k, s := range seq {
				w[s] |= where
				if k > 0 && ix.compounds[seq[k-1]+" "+s] {
					w[seq[k-1]+" "+s] |= where
				}
			}
		}
		ix.tools[i] = w
	}
	n := float64(len(tools) + 1)
	for term, d := range df {
		ix.idf[term] = math.Log(n / float64(d))
	}
	return ix
}

// terms calls f with the terms of a text's stems: a compound is one term,
// its words not counted apart.
func (ix *wordIndex) terms(seq []string, f func(string)) {
	for k := 0; k < len(seq); k++ {
		if k+1 < len(seq) && ix.compounds[seq[k]+" "+seq[k+1]] {
			f(seq[k] + " " + seq[k+1])
			k++
			continue
		}
		f(seq[k])
	}
}

// query weighs the terms of text: weight each, the largest when a term
// occurs more than once. Terms no tool has are left out.
func (ix *wordIndex) query(q map[string]float64, text string, weight float64) {
	ix.terms(stems(text), func(s string) {
		if _, ok := ix.idf[s]; ok && q[s] < weight {
			q[s] = weight
		}
	})
}

// score is how well tool i matches the weighed stems q: 0 for no shared
// word.
func (ix *wordIndex) score(i int, q map[string]float64) float64 {
	sum := 0.0
	if len(q) < len(ix.tools[i]) {
		for s, w := range q {
			if where := ix.tools[i][s]; where != 0 {
				sum += ix.weigh(s, w, where)
			}
		}
		return sum
	}
	for s, where := range ix.tools[i] {
		if w, ok := q[s]; ok {
			sum += ix.weigh(s, w, where)
		}
	}
	return sum
}

func (ix *wordIndex) weigh(s string, w float64, where uint8) float64 {
	w *= ix.idf[s]
	if where&inName != 0 {
		w *= nameWeight
	}
	return w
}

// ranked orders the catalog positions among by their score for q, best
// first; a tie, and tools that share no word with q, keep catalog order.
// It reports how many of them scored above 0.
func (ix *wordIndex) ranked(among []int, q map[string]float64) ([]int, []float64, int) {
	scores := make([]float64, len(ix.tools))
	matched := 0
	for _, i := range among {
		if scores[i] = ix.score(i, q); scores[i] > 0 {
			matched++
		}
	}
	order := slices.Clone(among)
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return a - b
	})
	out := make([]float64, len(order))
	for k, i := range order {
		out[k] = scores[i]
	}
	return order, out, matched
}

// stems are the stems of text's words, in order.
func stems(text string) []string {
	var out []string
	eachStem(text, func(s string) { out = append(out, s) })
	return out
}

// eachStem calls f with the stem of every word of text worth matching: a
// word is a run of letters and digits, also split where a lower-case
// letter meets an upper-case one (listPipelines); words of one letter and
// the commonest English words are left out.
func eachStem(text string, f func(string)) {
	start, prev := -1, rune(0)
	flush := func(end int) {
		if start >= 0 {
			if w := strings.ToLower(text[start:end]); utf8.RuneCountInString(w) > 1 && !stopWords[w] {
				f(stem(w))
			}
		}
		start = -1
	}
	for i, c := range text {
		switch {
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			flush(i)
		case start < 0:
			start = i
		case unicode.IsUpper(c) && unicode.IsLower(prev):
			flush(i)
			start = i
		}
		prev = c
	}
	flush(len(text))
}

// stem strips the English endings that make one word several (pipelines,
// merged, creating): crude, but the same on both sides of a match.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		w = w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		w = w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		w = w[:len(w)-2]
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// stopWords say nothing of which tool is meant.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about after all also an and any are as at be been before but by can
		could did do does done for from had has have he her his how i if in into is it its me more must my
		no not of on or our out please she should so some than that the their them then there these they
		this those to up us was we were what when where which while who why will with would you your`) {
		m[w] = true
	}
	return m
}()
