package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a config. Messages never contain a
// configured value, only key names, so a secret in the wrong place is not
// echoed.
type Problem struct {
	Path   string // key path such as "mcp_servers[1].command"; "" for the file as a whole
	Msg    string // what is wrong
	Line   int    // 1-based line in the file; 0 when unknown (e.g. a missing key)
	Column int    // 1-based column; set for YAML syntax errors only
}

// Error renders "path: msg", "path (line 4): msg" or "line 4, column 7: msg".
func (p Problem) Error() string {
	if loc := location(p.Path, p.Line, p.Column); loc != "" {
		return loc + ": " + p.Msg
	}
	return p.Msg
}

func location(path string, line, col int) string {
	pos := ""
	switch {
	case line > 0 && col > 0:
		pos = fmt.Sprintf("line %d, column %d", line, col)
	case line > 0:
		pos = fmt.Sprintf("line %d", line)
	}
	switch {
	case path == "":
		return pos
	case pos == "":
		return path
	}
	return path + " (" + pos + ")"
}

// Problems is every problem found in a config; Parse and Validate return it
// as *Problems.
type Problems []Problem

// Error renders one problem per line, sorted by path.
func (ps Problems) Error() string {
	sorted := slices.Clone(ps)
	sortProblems(sorted)
	lines := make([]string, len(sorted))
	for i, p := range sorted {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// err returns ps sorted as an error, or nil when there is none.
func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	sortProblems(ps)
	return &ps
}

func sortProblems(ps Problems) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Msg, b.Msg))
	})
}

// Warning is something accepted but worth telling, such as a key of a
// feature this version ignores.
type Warning struct {
	Path string // key path
	Msg  string // what happens
	Line int    // 1-based line in the file; 0 when unknown
}

// String renders the warning like a Problem.
func (w Warning) String() string {
	return location(w.Path, w.Line, 0) + ": " + w.Msg
}
