package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// A catalog larger than the provider accepts (OpenAI: 128 tools) or than a
// quarter of the context budget is offered in part: the first tools that
// fit, and a built-in tool that searches the rest and makes what it finds
// callable in the following requests (the tools a run has loaded are kept
// in its checkpoint). Every allowed tool stays reachable.

// SearchTool is the built-in tool that searches the tools not offered.
const SearchTool = "catalog/find_tools"

// searchMatches is how many tools one search makes callable; loadRoom is
// how many loaded tools a request with a tool limit keeps room for (the
// newest loaded).
const (
	searchMatches = 8
	loadRoom      = 2 * searchMatches
)

var searchTool = toolhost.Tool{Server: "catalog", Name: "find_tools", ReadOnly: true,
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words that describe the tool you need"}},"required":["query"]}`)}

// limit offers the tools in order while fewer than maxTools (0: any number)
// and while their definitions cost at most maxTokens (0: any), keeping a
// place for the search tool; it reports whether some were held back.
func (ts *Toolset) limit(maxTools, maxTokens int, count func(string) int) bool {
	if (maxTools == 0 || len(ts.tools) <= maxTools) && (maxTokens == 0 || ts.cost(ts.tools, count) <= maxTokens) {
		return false
	}
	search := ts.cost([]toolhost.Tool{searchTool}, count)
	used, n := search, 0
	for _, t := range ts.tools {
		c := ts.cost([]toolhost.Tool{t}, count)
		if (maxTools > 0 && n+1+loadRoom >= maxTools) || (maxTokens > 0 && used+c > maxTokens) {
			break
		}
		used, n = used+c, n+1
	}
	ts.offered, ts.maxTools, ts.maxTokens, ts.count = n, maxTools, maxTokens, count
	ts.searchDesc = fmt.Sprintf("Searches the %d tools not listed (of %d in all) by words of their names and descriptions; "+
		"the best matches become callable from your next reply on.", len(ts.tools)-n, len(ts.tools))
	searchTool := searchTool
	searchTool.Description = ts.searchDesc
	ts.byName[SearchTool] = searchTool
	ts.names.add(SearchTool)
	return true
}

// cost is what tools cost in a request: their definitions with native
// calls, their catalog lines otherwise.
func (ts *Toolset) cost(tools []toolhost.Tool, count func(string) int) int {
	n := 0
	for _, t := range tools {
		n += messageOverhead + count(t.FullName()) + count(t.Description)
		if ts.native {
			n += count(string(t.InputSchema))
		} else {
			n += count(paramSummary(t.InputSchema))
		}
	}
	return n
}

// Partial reports whether the catalog is offered in part, with the search
// tool.
func (ts *Toolset) Partial() bool { return ts.offered < len(ts.tools) }

// shown are the tools offered up front.
func (ts *Toolset) shown() []toolhost.Tool {
	if !ts.Partial() {
		return ts.tools
	}
	return append(slices.Clone(ts.tools[:ts.offered]), ts.byName[SearchTool])
}

// Defs are the native tool definitions of a request: those offered up
// front and, as many as the tool limit and the catalog's token share allow,
// the newest a search loaded; nil in JSON mode, where no tools field is
// sent.
func (ts *Toolset) Defs(loaded []string) []llm.Tool {
	if !ts.native {
		return nil
	}
	shown := ts.shown()
	defs := make([]llm.Tool, 0, len(shown)+len(loaded))
	for _, t := range shown {
		defs = append(defs, ts.def(t))
	}
	if len(loaded) == 0 {
		return defs
	}
	return append(defs, ts.loaded(loaded, len(shown), ts.cost(shown, ts.count))...)
}

// loaded are the definitions of the newest loaded tools that fit beside n
// tools costing used tokens, oldest first.
func (ts *Toolset) loaded(names []string, n, used int) []llm.Tool {
	var out []llm.Tool
	for i := len(names) - 1; i >= 0; i-- {
		t, ok := ts.byName[names[i]]
		if !ok {
			continue
		}
		c := ts.cost([]toolhost.Tool{t}, ts.count)
		if (ts.maxTools > 0 && n+len(out)+1 > ts.maxTools) || (ts.maxTokens > 0 && used+c > ts.maxTokens) {
			break
		}
		used += c
		out = append(out, ts.def(t))
	}
	slices.Reverse(out)
	return out
}

func (ts *Toolset) def(t toolhost.Tool) llm.Tool {
	params := t.InputSchema
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return llm.Tool{Name: ts.names.fn(t.FullName()), Description: t.Description, Parameters: params}
}

// Search finds the tools not offered up front that best match query: the
// text that answers the search, and their names, to load (again: a tool
// loaded long ago may have made room for newer ones).
func (ts *Toolset) Search(query string) (string, []string) {
	words := strings.Fields(strings.ToLower(query))
	type hit struct {
		t     toolhost.Tool
		score int
	}
	var hits []hit
	for _, t := range ts.tools[ts.offered:] {
		text := strings.ToLower(t.FullName() + " " + strings.ReplaceAll(t.Name, "_", " ") + " " + t.Description)
		score := 0
		for _, w := range words {
			if strings.Contains(text, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{t, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	if len(hits) > searchMatches {
		hits = hits[:searchMatches]
	}
	if len(hits) == 0 {
		return fmt.Sprintf("No tool beyond those listed matches %q. Try other words.", query), nil
	}
	var b strings.Builder
	var names []string
	b.WriteString("These tools are now callable:\n")
	for _, h := range hits {
		t := h.t
		names = append(names, t.FullName())
		if ts.native {
			fmt.Fprintf(&b, "- %s (function %s): %s\n", t.FullName(), ts.names.fn(t.FullName()), brief(t.Description, maxBrief))
		} else {
			fmt.Fprintf(&b, "- %s: %s\n  args: %s\n", t.FullName(), oneLine(t.Description), paramSummary(t.InputSchema))
		}
	}
	return strings.TrimRight(b.String(), "\n"), names
}
