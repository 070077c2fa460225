package config

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// resolve follows anchors, aliases and tags to the node that holds the value;
// nil when an alias cannot be resolved.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range maxDepth {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			n = d.anchorFor(v)
		default:
			return n
		}
	}
	return nil
}

// anchorFor returns the value of the last anchor of the alias's name defined
// before the alias.
func (d *decoder) anchorFor(alias *ast.AliasNode) ast.Node {
	if alias.Value == nil {
		return nil
	}
	name, at := alias.Value.GetToken().Value, offsetOf(alias)
	var found ast.Node
	for _, a := range d.anchors {
		if a.Name != nil && a.Name.GetToken().Value == name && offsetOf(a) < at {
			found = a.Value
		}
	}
	return found
}

// entries returns the key/value pairs of m with merge keys (<<) applied:
// explicit keys win over merged ones, and earlier merged mappings over later.
func (d *decoder) entries(path string, m *ast.MappingNode, depth int) []*ast.MappingValueNode {
	var explicit, merged []*ast.MappingValueNode
	for _, mv := range m.Values {
		if mv.Key != nil && mv.Key.Type() == ast.MergeKeyType {
			merged = append(merged, d.mergeEntries(path, mv.Value, depth+1)...)
			continue
		}
		explicit = append(explicit, mv)
	}
	seen := make(map[string]bool, len(explicit))
	for _, mv := range explicit {
		k, _ := keyText(mv.Key)
		seen[k] = true
	}
	out := explicit
	for _, mv := range merged {
		if k, _ := keyText(mv.Key); !seen[k] {
			seen[k] = true
			out = append(out, mv)
		}
	}
	return out
}

func (d *decoder) mergeEntries(path string, n ast.Node, depth int) []*ast.MappingValueNode {
	if depth > maxDepth {
		d.problem(path, n, "merge keys nested too deeply")
		return nil
	}
	switch v := d.resolve(n).(type) {
	case *ast.MappingNode:
		return d.entries(path, v, depth)
	case *ast.SequenceNode:
		var out []*ast.MappingValueNode
		for _, e := range v.Values {
			if m, ok := d.resolve(e).(*ast.MappingNode); ok {
				out = append(out, d.entries(path, m, depth)...)
			} else {
				d.problem(path, e, "<< merges a mapping or a list of mappings")
			}
		}
		return out
	}
	d.problem(path, n, "<< merges a mapping or a list of mappings")
	return nil
}

// keyText returns the text of a scalar mapping key.
func keyText(k ast.MapKeyNode) (string, bool) {
	switch v := k.(type) {
	case *ast.StringNode:
		return v.Value, true
	case ast.ScalarNode:
		if v.Type() != ast.NullType {
			return v.GetToken().Value, true
		}
	}
	return "", false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func lineOf(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func offsetOf(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Offset
}

// kindOf names what a node holds, for type errors.
func kindOf(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.AliasNode, *ast.AnchorNode, *ast.TagNode:
		return "a value of another kind"
	}
	return "a string"
}

// unknownKeyMsg suggests the nearest known key when it is close enough.
func unknownKeyMsg(key string, known []string) string {
	return "unknown key" + didYouMean(key, known...)
}

// didYouMean is ` (did you mean "x"?)` for the nearest of known to s when
// it is close enough, else "". Only a known word is quoted, never s.
func didYouMean(s string, known ...string) string {
	best, bestDist := "", -1
	for _, k := range known {
		dist := editDistance(s, k)
		if dist <= 1+len(k)/6 && (bestDist < 0 || dist < bestDist) {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance counts the single-byte insertions, deletions, substitutions
// and swaps of neighbours that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, rows[i-2][j-2]+1)
			}
			rows[i][j] = d
		}
	}
	return rows[len(a)][len(b)]
}
