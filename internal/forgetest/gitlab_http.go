package forgetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type glObj = map[string]any

// glRoute is one endpoint: a method and path segments after /api/v4, where
// ":x" matches one (escaped) segment.
type glRoute struct {
	method  string
	pattern []string
	handle  func(g *GitLab, w http.ResponseWriter, r *http.Request, args []string)
}

var glRoutes = []glRoute{
	{http.MethodGet, []string{"user"}, (*GitLab).getUser},
	{http.MethodGet, []string{"projects", ":id"}, (*GitLab).getProject},
	{http.MethodGet, []string{"projects", ":id", "issues"}, listProjectItems(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests"}, listProjectItems(KindMergeRequest)},
	{http.MethodPost, []string{"projects", ":id", "merge_requests"}, createMR},
	{http.MethodGet, []string{"groups", ":id", "issues"}, listGroupItems(KindIssue)},
	{http.MethodGet, []string{"groups", ":id", "merge_requests"}, listGroupItems(KindMergeRequest)},
	{http.MethodGet, []string{"projects", ":id", "issues", ":iid"}, getItem(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests", ":iid"}, getItem(KindMergeRequest)},
	{http.MethodPut, []string{"projects", ":id", "issues", ":iid"}, updateItem(KindIssue)},
	{http.MethodPut, []string{"projects", ":id", "merge_requests", ":iid"}, updateItem(KindMergeRequest)},
	{http.MethodGet, []string{"projects", ":id", "issues", ":iid", "notes"}, listNotes(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "issues", ":iid", "resource_label_events"}, listLabelEvents(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests", ":iid", "resource_label_events"}, listLabelEvents(KindMergeRequest)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests", ":iid", "notes"}, listNotes(KindMergeRequest)},
	{http.MethodPost, []string{"projects", ":id", "issues", ":iid", "notes"}, createNote(KindIssue)},
	{http.MethodPost, []string{"projects", ":id", "merge_requests", ":iid", "notes"}, createNote(KindMergeRequest)},
	{http.MethodPut, []string{"projects", ":id", "issues", ":iid", "notes", ":note_id"}, updateNote(KindIssue)},
	{http.MethodPut, []string{"projects", ":id", "merge_requests", ":iid", "notes", ":note_id"}, updateNote(KindMergeRequest)},
	{http.MethodDelete, []string{"projects", ":id", "issues", ":iid", "notes", ":note_id"}, deleteNote(KindIssue)},
	{http.MethodDelete, []string{"projects", ":id", "merge_requests", ":iid", "notes", ":note_id"}, deleteNote(KindMergeRequest)},
	{http.MethodGet, []string{"projects", ":id", "members", "all"}, (*GitLab).listAllMembers},
	{http.MethodGet, []string{"projects", ":id", "labels"}, listProjectLabels},
	{http.MethodPost, []string{"projects", ":id", "labels"}, createProjectLabel},
	{http.MethodGet, []string{"projects", ":id", "issues", ":iid", "award_emoji"}, listItemAwards(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests", ":iid", "award_emoji"}, listItemAwards(KindMergeRequest)},
	{http.MethodPost, []string{"projects", ":id", "issues", ":iid", "award_emoji"}, awardItem(KindIssue)},
	{http.MethodPost, []string{"projects", ":id", "merge_requests", ":iid", "award_emoji"}, awardItem(KindMergeRequest)},
	{http.MethodDelete, []string{"projects", ":id", "issues", ":iid", "award_emoji", ":award_id"}, deleteItemAward(KindIssue)},
	{http.MethodDelete, []string{"projects", ":id", "merge_requests", ":iid", "award_emoji", ":award_id"}, deleteItemAward(KindMergeRequest)},
	{http.MethodGet, []string{"projects", ":id", "issues", ":iid", "notes", ":note_id", "award_emoji"}, listNoteAwards(KindIssue)},
	{http.MethodGet, []string{"projects", ":id", "merge_requests", ":iid", "notes", ":note_id", "award_emoji"}, listNoteAwards(KindMergeRequest)},
	{http.MethodPost, []string{"projects", ":id", "issues", ":iid", "notes", ":note_id", "award_emoji"}, awardNote(KindIssue)},
	{http.MethodPost, []string{"projects", ":id", "merge_requests", ":iid", "notes", ":note_id", "award_emoji"}, awardNote(KindMergeRequest)},
}

// glErrBody renders a fault's body the way GitLab words errors.
func glErrBody(status int) string {
	b, _ := json.Marshal(glObj{"message": fmt.Sprintf("%d %s", status, http.StatusText(status))})
	return string(b)
}

// serve authenticates, sets the rate-limit headers and dispatches.
func (g *GitLab) serve(w http.ResponseWriter, r *http.Request) {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	g.rateHeaders(w.Header())
	if !g.authorized(r) {
		g.reply(w, r, http.StatusUnauthorized, glObj{"message": "401 Unauthorized"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/")
	if !ok {
		g.reply(w, r, http.StatusNotFound, glObj{"error": "404 Not Found"})
		return
	}
	segs := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	pathFound := false
	for _, rt := range glRoutes {
		args, ok := rt.match(segs)
		if !ok {
			continue
		}
		pathFound = true
		if rt.method == r.Method || rt.method == http.MethodGet && r.Method == http.MethodHead {
			rt.handle(g, w, r, args)
			return
		}
	}
	if pathFound {
		g.reply(w, r, http.StatusMethodNotAllowed, glObj{"error": "405 Method Not Allowed"})
		return
	}
	g.reply(w, r, http.StatusNotFound, glObj{"error": "404 Not Found"})
}

func (rt glRoute) match(segs []string) ([]string, bool) {
	if len(segs) != len(rt.pattern) {
		return nil, false
	}
	var args []string
	for i, p := range rt.pattern {
		if strings.HasPrefix(p, ":") {
			s, err := url.PathUnescape(segs[i])
			if err != nil || s == "" {
				return nil, false
			}
			args = append(args, s)
			continue
		}
		if segs[i] != p {
			return nil, false
		}
	}
	return args, true
}

func (g *GitLab) authorized(r *http.Request) bool {
	if g.Token == "" || g.revoked.Load() {
		return false
	}
	if r.Header.Get("PRIVATE-TOKEN") == g.Token {
		return true
	}
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	return ok && tok == g.Token
}

// RevokeToken revokes the personal access token (Token), as its owner or
// an administrator does on GitLab: it is answered 401 from now on, on the
// API and by git.
func (g *GitLab) RevokeToken() { g.revoked.Store(true) }

// rateHeaders counts the request in the current minute and sets GitLab's
// RateLimit-* headers.
func (g *GitLab) rateHeaders(h http.Header) {
	now := g.clock().UTC()
	window := now.Truncate(time.Minute)
	if !window.Equal(g.rlWindow) {
		g.rlWindow, g.rlCount = window, 0
	}
	g.rlCount++
	reset := window.Add(time.Minute)
	h.Set("RateLimit-Name", "throttle_authenticated_api")
	h.Set("RateLimit-Limit", strconv.Itoa(glRateLimit))
	h.Set("RateLimit-Observed", strconv.Itoa(g.rlCount))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(0, glRateLimit-g.rlCount)))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("RateLimit-ResetTime", reset.Format(http.TimeFormat))
}

// reply writes v as JSON. A successful GET carries a weak ETag and is
// answered 304 with no body when If-None-Match names it.
func (g *GitLab) reply(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"message":"500 Internal Server Error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "max-age=0, private, must-revalidate")
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && status == http.StatusOK {
		sum := sha256.Sum256(body)
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		h.Set("ETag", etag)
		if glETagMatches(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func glETagMatches(header, etag string) bool {
	weak := strings.TrimPrefix(etag, "W/")
	for c := range strings.SplitSeq(header, ",") {
		c = strings.TrimSpace(c)
		if c == "*" || strings.TrimPrefix(c, "W/") == weak {
			return true
		}
	}
	return false
}

// paginate answers one page of items with GitLab's offset pagination
// headers: per_page defaults to 20 and is capped at 100.
func (g *GitLab) paginate(w http.ResponseWriter, r *http.Request, items []glObj) {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 {
		per = 20
	}
	per = min(per, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	total := len(items)
	pages := max(1, (total+per-1)/per)
	lo, hi := min(total, (page-1)*per), min(total, page*per)
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(per))
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	h.Set("X-Prev-Page", "")
	var links []string
	link := func(p int, rel string) {
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		links = append(links, fmt.Sprintf(`<%s%s?%s>; rel="%s"`, g.srv.URL, r.URL.EscapedPath(), q.Encode(), rel))
	}
	if page > 1 && page <= pages+1 {
		h.Set("X-Prev-Page", strconv.Itoa(page-1))
		link(page-1, "prev")
	}
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
		link(page+1, "next")
	}
	link(1, "first")
	link(pages, "last")
	h.Set("Link", strings.Join(links, ", "))
	g.reply(w, r, http.StatusOK, items[lo:hi])
}

// params reads a write request's parameters as glParams does, answering 400
// itself when they cannot be read.
func (g *GitLab) params(w http.ResponseWriter, r *http.Request) (map[string]string, bool) {
	ps, err := glParams(r)
	if err != nil {
		g.reply(w, r, http.StatusBadRequest, glObj{"error": "400 Bad request - " + err.Error()})
		return nil, false
	}
	return ps, true
}

// glParams reads a write request's parameters from the query and the body,
// JSON or form-encoded, as GitLab accepts both. Arrays are joined with ",".
func glParams(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range r.URL.Query() {
		out[k] = strings.Join(v, ",")
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			out[k] = strings.Join(v, ",")
		}
		return out, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return out, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		switch v := v.(type) {
		case nil:
		case string:
			out[k] = v
		case []any:
			var s []string
			for _, e := range v {
				s = append(s, fmt.Sprint(e))
			}
			out[k] = strings.Join(s, ",")
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out, nil
}

func glSplitLabels(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func glTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
