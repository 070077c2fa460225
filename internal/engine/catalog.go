package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// A catalog larger than the provider accepts (OpenAI: 128 tools) or than
// its share of the context budget (a quarter) is offered in part, and each
// run keeps its own offer in its checkpoint (checkpoint.Offered):
//
//   - always: the tools of the built-in workspace server (in process, one
//     instance per task: the tools the task's checkout is worked with) and
//     the built-in catalog/find_tools, which searches the rest;
//   - from the first request: the tools that best match the task's title
//     and description (rank.go), within half the share, so that the first
//     searches have room without taking away what the task was given;
//   - from the request after a search: the best matches it found. Room is
//     made by taking out the offered tools least recently used (called or
//     loaded); a tool that cannot be offered even so is named in the
//     search's answer with the reason, never as callable.
//
// What a tool costs is what it adds to a request: its line in the system
// prompt's catalog and, with native calls, its definition in the tools
// field; the offer never costs more than the share. The system prompt's
// catalog is the run's own, rewritten when a search changes the offer, so
// that every request lists exactly what it offers. A call of a tool not
// offered now (taken out, or never loaded) still runs: every tool of the
// catalog is allowed, the offer only decides which definitions travel in a
// request, and only a search changes it, saying so.

// SearchTool is the built-in tool that searches the tools not offered.
const SearchTool = "catalog/find_tools"

// searchMatches is how many tools one search loads at most, and the tool
// places the first request leaves free for them.
const searchMatches = 8

var searchTool = toolhost.Tool{Server: "catalog", Name: "find_tools", ReadOnly: true,
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words that describe the tool you need"}},"required":["query"]}`)}

// Offer is a tool a run offers beyond those always offered, and when the
// run last used it.
type Offer struct {
	Tool string `json:"tool"`
	// Used is the number of the model request after which the tool was
	// last called or loaded; 0 for a tool offered from the first request
	// and not called since.
	Used int `json:"used,omitempty"`
}

// limit decides whether the catalog is offered in part: when it has more
// than maxTools tools (0: any number) or costs more than maxTokens (0: any).
// Then it prepares the search tool, the tools always offered, the word
// index and the choice of a run with no task words (what Catalog lists).
func (ts *Toolset) limit(maxTools, maxTokens int, count func(string) int) bool {
	ts.count, ts.maxTools, ts.share = count, maxTools, maxTokens
	ts.costs = make([]int, len(ts.tools))
	total := 0
	for i, t := range ts.tools {
		ts.costs[i] = ts.cost(t)
		total += ts.costs[i]
	}
	if (maxTools == 0 || len(ts.tools) <= maxTools) && (maxTokens == 0 || total <= maxTokens) {
		return false
	}
	ts.partial = true
	ts.searchDesc = fmt.Sprintf("Searches the %d tools of the catalog by words of their names and descriptions; "+
		"the best matches join your tool list from your next reply on, in place of the tools least recently used "+
		"when there is no room.", len(ts.tools))
	search := searchTool
	search.Description = ts.searchDesc
	ts.byName[SearchTool] = search
	ts.names.add(SearchTool)
	ts.base = ts.cost(search)
	workspace := map[string]bool{}
	for _, s := range ts.servers {
		workspace[s.Name] = s.InProcess != nil && s.Scope == toolhost.ScopeTask
	}
	for i, t := range ts.tools {
		if workspace[t.Server] && (maxTokens == 0 || ts.base+ts.costs[i] <= maxTokens) &&
			(maxTools == 0 || len(ts.pinned)+2 <= maxTools) {
			ts.pinned = append(ts.pinned, i)
			ts.base += ts.costs[i]
		}
	}
	ts.index = newWordIndex(ts.tools)
	ts.initial = ts.choose("", "")
	return true
}

// cost is what tool t adds to a request: its catalog line, and its native
// definition (counted as Run.toolTokens counts it).
func (ts *Toolset) cost(t toolhost.Tool) int {
	n := ts.count(ts.line(t))
	if ts.native {
		d := ts.def(t)
		n += messageOverhead + ts.count(d.Name) + ts.count(d.Description) + ts.count(string(d.Parameters))
	}
	return n
}

// offerCost is what the tools offered with offer cost together.
func (ts *Toolset) offerCost(offer []Offer) int {
	n := ts.base
	for _, o := range offer {
		n += ts.costs[ts.pos[o.Tool]]
	}
	return n
}

// Partial reports whether the catalog is offered in part, with the search
// tool.
func (ts *Toolset) Partial() bool { return ts.partial }

// choose is the first request's offer for a task: the tools that share the
// most words with its title and description (title words counting double),
// then the others in catalog order, as many as fit in half the share and
// leave searchMatches tool places free.
func (ts *Toolset) choose(title, body string) []Offer {
	q := map[string]float64{}
	ts.index.query(q, body[:min(len(body), maxBodyChars)], 1)
	ts.index.query(q, title, titleWeight)
	order, _, _ := ts.index.ranked(ts.open(nil), q)
	used, n := ts.base, len(ts.pinned)+1
	offer := []Offer{}
	for _, i := range order {
		if ts.maxTools > 0 && n+1 > ts.maxTools-searchMatches {
			break
		}
		if ts.share > 0 && used+ts.costs[i] > ts.share/2 {
			continue
		}
		offer = append(offer, Offer{Tool: ts.tools[i].FullName()})
		used += ts.costs[i]
		n++
	}
	return offer
}

// open are the catalog positions of the tools neither always offered nor
// in offer.
func (ts *Toolset) open(offer []Offer) []int {
	taken := make([]bool, len(ts.tools))
	for _, i := range ts.pinned {
		taken[i] = true
	}
	for _, o := range offer {
		taken[ts.pos[o.Tool]] = true
	}
	out := make([]int, 0, len(ts.tools))
	for i := range ts.tools {
		if !taken[i] {
			out = append(out, i)
		}
	}
	return out
}

// offered are the tools a request with offer offers, in the order they are
// listed: the tools always offered, the search tool, then offer's.
func (ts *Toolset) offered(offer []Offer) []toolhost.Tool {
	if !ts.partial {
		return ts.tools
	}
	out := make([]toolhost.Tool, 0, len(ts.pinned)+1+len(offer))
	for _, i := range ts.pinned {
		out = append(out, ts.tools[i])
	}
	out = append(out, ts.byName[SearchTool])
	for _, o := range offer {
		out = append(out, ts.byName[o.Tool])
	}
	return out
}

// Defs are the native tool definitions of a request offering offer (all of
// the catalog when it is offered whole); nil in JSON mode, where no tools
// field is sent.
func (ts *Toolset) Defs(offer []Offer) []llm.Tool {
	if !ts.native {
		return nil
	}
	tools := ts.offered(offer)
	defs := make([]llm.Tool, 0, len(tools))
	for _, t := range tools {
		defs = append(defs, ts.def(t))
	}
	return defs
}

func (ts *Toolset) def(t toolhost.Tool) llm.Tool {
	params := t.InputSchema
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return llm.Tool{Name: ts.names.fn(t.FullName()), Description: t.Description, Parameters: params}
}

// trim makes a saved offer fit the catalog as it is now (a restart may
// have changed it): tools no longer in it, or always offered now, or
// listed twice are dropped, and the least recently used taken out while the
// offer passes the share or the tool limit.
func (ts *Toolset) trim(offer []Offer) []Offer {
	seen := map[string]bool{}
	out := slices.DeleteFunc(slices.Clone(offer), func(o Offer) bool {
		i, ok := ts.pos[o.Tool]
		drop := !ok || seen[o.Tool] || slices.Contains(ts.pinned, i)
		seen[o.Tool] = true
		return drop
	})
	for len(out) > 0 && ((ts.share > 0 && ts.offerCost(out) > ts.share) ||
		(ts.maxTools > 0 && len(ts.pinned)+1+len(out) > ts.maxTools)) {
		k := ts.leastRecent(out, -1)
		out = slices.Delete(out, k, k+1)
	}
	return out
}

// leastRecent is the position in offer of the tool to take out first:
// the one used longest ago, of those used the same time the one listed
// last (the least relevant to the task, the worst match of a search).
// Tools used after request before are not taken out; -1 when none is left.
func (ts *Toolset) leastRecent(offer []Offer, before int) int {
	k := -1
	for j, o := range offer {
		if (before < 0 || o.Used < before) && (k < 0 || o.Used <= offer[k].Used) {
			k = j
		}
	}
	return k
}

// searched is what a search did to an offer.
type searched struct {
	loaded, removed []string
	refused         []refusal
}

type refusal struct{ tool, why string }

// search finds the tools not offered that best match query: at most
// searchMatches, best first, each scoring at least half the best.
func (ts *Toolset) search(query string, offer []Offer) []int {
	q := map[string]float64{}
	ts.index.query(q, query, 1)
	order, scores, matched := ts.index.ranked(ts.open(offer), q)
	n := 0
	for n < min(matched, searchMatches) && scores[n] >= scores[0]/2 {
		n++
	}
	return order[:n]
}

// load adds the tools at positions found to offer, best first, as used
// after request step: room is made by taking out the tools least recently
// used before step (a tool loaded or called since the last model reply
// stays: what this reply was told holds). A tool that cannot be offered
// even so is refused, saying why.
func (ts *Toolset) load(offer []Offer, found []int, step int) ([]Offer, searched) {
	var s searched
	room := ts.share - ts.base
	places := ts.maxTools - len(ts.pinned) - 1
	fits := func(cost, n int) bool {
		return (ts.share == 0 || cost <= room) && (ts.maxTools == 0 || n <= places)
	}
	for _, i := range found {
		name, c := ts.tools[i].FullName(), ts.costs[i]
		switch {
		case ts.share > 0 && c > room:
			s.refused = append(s.refused, refusal{name, fmt.Sprintf("its definition alone takes %d tokens, more than the %d "+
				"your tool list has for it in this model's context window (a quarter of the budget, less the tools always offered)", c, room)})
			continue
		case ts.maxTools > 0 && places < 1:
			s.refused = append(s.refused, refusal{name, fmt.Sprintf("the model's provider takes at most %d tools a request, "+
				"and the tools always offered take every place", ts.maxTools)})
			continue
		}
		next := slices.Clone(offer)
		var removed []string
		for !fits(ts.offerCost(next)-ts.base+c, len(next)+1) {
			k := ts.leastRecent(next, step)
			if k < 0 {
				break
			}
			removed = append(removed, next[k].Tool)
			next = slices.Delete(next, k, k+1)
		}
		if !fits(ts.offerCost(next)-ts.base+c, len(next)+1) {
			s.refused = append(s.refused, refusal{name, "no room beside the tools always offered and those loaded or called " +
				"in this same reply; search again in your next reply"})
			continue
		}
		offer = append(next, Offer{Tool: name, Used: step})
		s.loaded = append(s.loaded, name)
		s.removed = append(s.removed, removed...)
	}
	return offer, s
}

// searchAnswer is the search's answer: what is now in the tool list (as the
// catalog describes it), what left it, and what was found and could not
// be loaded, with why.
func (ts *Toolset) searchAnswer(query string, s searched) string {
	if len(s.loaded) == 0 && len(s.refused) == 0 {
		return fmt.Sprintf("No tool beyond those in your tool list matches %q. Try other words.", query)
	}
	var b strings.Builder
	if len(s.loaded) > 0 {
		b.WriteString("These tools are now in your tool list, callable from your next reply on:\n")
		for _, name := range s.loaded {
			t := ts.byName[name]
			if ts.native {
				fmt.Fprintf(&b, "- %s (function %s): %s\n", name, ts.names.fn(name), brief(t.Description, maxBrief))
			} else {
				fmt.Fprintf(&b, "- %s: %s\n  args: %s\n", name, oneLine(t.Description), paramSummary(t.InputSchema))
			}
		}
	}
	if len(s.removed) > 0 {
		fmt.Fprintf(&b, "To make room, these left your tool list (the least recently used; a search brings one back): %s.\n",
			strings.Join(s.removed, ", "))
	}
	if len(s.refused) > 0 {
		if len(s.loaded) == 0 {
			b.WriteString("No tool was loaded. ")
		}
		b.WriteString("Found but not in your tool list:\n")
		for _, r := range s.refused {
			fmt.Fprintf(&b, "- %s: not loaded: %s.\n", r.tool, r.why)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// line is tool t's line in the system prompt's catalog: with native calls
// its name, function and first sentence; in the JSON protocol its whole
// description and a summary of its arguments.
func (ts *Toolset) line(t toolhost.Tool) string {
	var b strings.Builder
	b.WriteString("- " + t.FullName())
	desc := oneLine(t.Description)
	if ts.native {
		b.WriteString(" (function " + ts.names.fn(t.FullName()) + ")")
		desc = brief(t.Description, maxBrief)
	}
	if desc != "" {
		b.WriteString(": " + desc)
	}
	if t.ReadOnly {
		b.WriteString(" (read-only)")
	}
	if !ts.native {
		b.WriteString("\n  args: " + paramSummary(t.InputSchema))
	}
	return b.String()
}

// The run's side: its offer, kept in its checkpoint.

// offer sets up the run's offer: a new run's chosen for its task, a resumed
// run's from its checkpoint (chosen for the task when the checkpoint holds
// none: written before offers were kept, the tools it loaded then are
// loaded again), and puts its catalog in the system prompt.
func (r *Run) offer(resumed bool) error {
	ts, st := r.e.ts, r.st
	had := st.Offered != nil || st.Loaded != nil
	switch {
	case !ts.partial:
		st.Offered = nil
	case resumed && st.Offered != nil:
		st.Offered = ts.trim(st.Offered)
	default:
		st.Offered = ts.choose(r.in.Task.Title, r.in.Task.Body)
		var legacy []int
		for _, name := range st.Loaded {
			if i, ok := ts.pos[name]; ok && !slices.Contains(ts.pinned, i) &&
				!slices.ContainsFunc(st.Offered, func(o Offer) bool { return o.Tool == name }) {
				legacy = append(legacy, i)
			}
		}
		st.Offered, _ = ts.load(st.Offered, legacy, st.Calls)
	}
	st.Loaded = nil
	if !ts.partial && !(resumed && had) {
		return nil
	}
	return r.list()
}

// list puts the run's catalog in its system prompt, in place of the one
// the policy's prompt was made with (Toolset.Catalog).
func (r *Run) list() error {
	ts := r.e.ts
	sys := r.p.System()
	if ts.partial {
		whole, err := ts.Catalog()
		if err != nil {
			return err
		}
		own, err := ts.catalog(r.st.Offered)
		if err != nil {
			return err
		}
		sys = strings.Replace(sys, whole, own, 1)
	}
	r.st.Messages[0].Content = sys
	return nil
}

// defs are the native tool definitions of the run's next request.
func (r *Run) defs() []llm.Tool { return r.e.ts.Defs(r.st.Offered) }

// used notes that the run called tool: an offered tool it calls is taken
// out last.
func (r *Run) used(tool string) {
	for i := range r.st.Offered {
		if r.st.Offered[i].Tool == tool {
			r.st.Offered[i].Used = r.st.Calls
		}
	}
}

// search answers a call of the search tool: it loads the best matches and
// says what changed, and the system prompt lists the new offer.
func (r *Run) search(query string) (string, error) {
	ts, st := r.e.ts, r.st
	if !ts.partial {
		return "Every tool is in your tool list already.", nil
	}
	found := ts.search(query, st.Offered)
	var s searched
	st.Offered, s = ts.load(st.Offered, found, st.Calls)
	r.log.Info("catalog search", "query", query, "loaded", s.loaded, "removed", s.removed, "refused", len(s.refused),
		"tokens", ts.offerCost(st.Offered), "share", ts.share)
	if len(s.loaded) > 0 {
		if err := r.list(); err != nil {
			return "", err
		}
	}
	return ts.searchAnswer(query, s), nil
}
