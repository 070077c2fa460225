package forgetest

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// ghSearchCap is how many results the search API lets a client page
// through, whatever total_count says.
const ghSearchCap = 1000

// ghQuery is a parsed issue search query. The emulator understands the
// qualifiers below; any other qualifier is answered with 422 so a test
// never silently relies on one it ignores.
type ghQuery struct {
	state     string   // is:open, is:closed, state:...
	kind      string   // is:issue, is:pr, type:...
	labels    []string // label:x (all must match)
	notLabels []string // -label:x
	scopes    []string // user:, org:, owner: (an owner) or repo: (owner/name); any may match
	authors   []string // author:
	assignee  string   // assignee:, or "none" for no:assignee
	created   []ghTimeBound
	archived  string // archived:true or archived:false (the emulator has no archived repositories)
	text      []string
}

type ghTimeBound struct {
	op string // ">=", ">", "<=", "<"
	t  time.Time
}

// ghTokens splits a query on spaces, keeping double-quoted runs together
// and dropping the quotes.
func ghTokens(q string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, c := range q {
		switch {
		case c == '"':
			quoted = !quoted
		case (c == ' ' || c == '\t' || c == '\n') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func ghParseQuery(q string) (ghQuery, string) {
	var p ghQuery
	for _, tok := range ghTokens(q) {
		neg := strings.HasPrefix(tok, "-")
		key, val, ok := strings.Cut(strings.TrimPrefix(tok, "-"), ":")
		if !ok {
			p.text = append(p.text, strings.ToLower(tok))
			continue
		}
		key = strings.ToLower(key)
		if neg && key != "label" {
			return p, "the emulator does not support negating " + key + ":"
		}
		switch key {
		case "is", "state", "type":
			switch strings.ToLower(val) {
			case "open", "closed":
				p.state = strings.ToLower(val)
			case "issue":
				p.kind = "issue"
			case "pr", "pull-request":
				p.kind = "pr"
			default:
				return p, "unsupported value " + tok
			}
		case "label":
			if neg {
				p.notLabels = append(p.notLabels, val)
			} else {
				p.labels = append(p.labels, val)
			}
		case "user", "org", "owner", "repo":
			p.scopes = append(p.scopes, strings.ToLower(val))
		case "author":
			p.authors = append(p.authors, val)
		case "assignee":
			p.assignee = val
		case "no":
			if val != "assignee" {
				return p, "unsupported value " + tok
			}
			p.assignee = "none"
		case "archived":
			if val != "true" && val != "false" {
				return p, "unsupported value " + tok
			}
			p.archived = val
		case "created":
			b, ok := ghParseBounds(val)
			if !ok {
				return p, "cannot read the date in " + tok
			}
			p.created = append(p.created, b...)
		default:
			return p, "the emulator does not support the qualifier " + key + ":"
		}
	}
	return p, ""
}

// ghParseBounds reads ">=T", ">T", "<=T", "<T", "A..B" or "T", where T is
// a date or an RFC 3339 time.
func ghParseBounds(v string) ([]ghTimeBound, bool) {
	if a, b, ok := strings.Cut(v, ".."); ok {
		lo, ok1 := ghParseBounds(">=" + a)
		hi, ok2 := ghParseBounds("<=" + b)
		return append(lo, hi...), ok1 && ok2
	}
	op := ""
	for _, o := range []string{">=", "<=", ">", "<"} {
		if strings.HasPrefix(v, o) {
			op, v = o, strings.TrimPrefix(v, o)
			break
		}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		if op == "" {
			return []ghTimeBound{{">=", t}, {"<=", t}}, true
		}
		return []ghTimeBound{{op, t}}, true
	}
	day, err := time.Parse("2006-01-02", v)
	if err != nil {
		return nil, false
	}
	next := day.AddDate(0, 0, 1)
	switch op {
	case "":
		return []ghTimeBound{{">=", day}, {"<", next}}, true
	case "<=":
		return []ghTimeBound{{"<", next}}, true
	case ">":
		return []ghTimeBound{{">=", next}}, true
	}
	return []ghTimeBound{{op, day}}, true
}

func (b ghTimeBound) holds(t time.Time) bool {
	switch b.op {
	case ">=":
		return !t.Before(b.t)
	case ">":
		return t.After(b.t)
	case "<=":
		return !t.After(b.t)
	default:
		return t.Before(b.t)
	}
}

func (p ghQuery) matches(r *ghRepo, it *ghItem) bool {
	if (p.state != "" && it.state != p.state) || p.archived == "true" {
		return false
	}
	if p.kind != "" && (p.kind == "pr") != (it.pull != nil) {
		return false
	}
	hasLabel := func(name string) bool {
		return slices.ContainsFunc(it.labels, func(l *ghLabel) bool { return strings.EqualFold(l.name, name) })
	}
	for _, l := range p.labels {
		if !hasLabel(l) {
			return false
		}
	}
	if slices.ContainsFunc(p.notLabels, hasLabel) {
		return false
	}
	full := strings.ToLower(r.owner + "/" + r.name)
	if len(p.scopes) > 0 && !slices.ContainsFunc(p.scopes, func(s string) bool {
		return s == full || s == strings.ToLower(r.owner)
	}) {
		return false
	}
	if len(p.authors) > 0 && !slices.ContainsFunc(p.authors, func(a string) bool { return strings.EqualFold(a, it.author) }) {
		return false
	}
	if !ghIssueMatches(it, "all", "", "", p.assignee, time.Time{}) {
		return false
	}
	for _, b := range p.created {
		if !b.holds(it.created) {
			return false
		}
	}
	text := strings.ToLower(it.title + "\n" + it.body)
	for _, w := range p.text {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// searchIssues is GET /search/issues: the legacy (lexical) issue search,
// with its 1000-result window.
func (g *GitHub) searchIssues(w http.ResponseWriter, r *http.Request) {
	g.st.Lock()
	defer g.st.Unlock()
	q := r.URL.Query()
	if strings.TrimSpace(q.Get("q")) == "" {
		g.validationFailed(w, "Search", "q", "q is missing")
		return
	}
	p, bad := ghParseQuery(q.Get("q"))
	if bad != "" {
		g.validationFailed(w, "Search", "q", bad)
		return
	}
	perPage, page := ghPaging(r)
	if (page-1)*perPage >= ghSearchCap {
		g.failDoc(w, http.StatusUnprocessableEntity, "Only the first 1000 search results are available", "https://docs.github.com/v3/search/")
		return
	}
	var items []*ghItem
	owners := map[*ghItem]*ghRepo{}
	for _, repo := range g.repos {
		for _, it := range repo.items {
			if p.matches(repo, it) {
				items = append(items, it)
				owners[it] = repo
			}
		}
	}
	sort, order := q.Get("sort"), q.Get("order")
	if sort == "" {
		sort, order = "created", "desc" // "best match": newest first here
	}
	ghSortItems(items, sort, order)
	u := ghURLsFor(r)
	out := []any{}
	for _, it := range ghPage(w, r, items, ghSearchCap) {
		v := g.issueJSON(u, owners[it], it)
		v["score"] = 1.0
		if v["body"] == nil {
			v["body"] = "" // the search item schema, unlike the issue's, has a non-null body
		}
		out = append(out, v)
	}
	g.reply(w, r, http.StatusOK, map[string]any{
		"total_count": len(items), "incomplete_results": false, "search_type": "lexical", "items": out,
	})
}
