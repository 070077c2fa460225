package forgetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GitHub's documentation links, as they appear in its error bodies.
const (
	ghDocsRateLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits"
	ghDocsSecondary = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// ghErrorBody renders GitHub's error JSON for an injected fault's status.
// A 403 fault answers like GitHub's secondary rate limit, the usual reason
// for a 403 worth injecting.
func ghErrorBody(status int) string {
	var v map[string]any
	switch status {
	case http.StatusForbidden:
		v = map[string]any{
			"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
				"If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.",
			"documentation_url": ghDocsSecondary, "status": "403",
		}
	case http.StatusTooManyRequests:
		v = map[string]any{"message": "API rate limit exceeded for user ID 1001.", "documentation_url": ghDocsRateLimit, "status": "429"}
	default:
		v = map[string]any{"message": http.StatusText(status), "status": strconv.Itoa(status)}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// SecondaryRateLimit returns a fault answering GitHub's 403 secondary rate
// limit with Retry-After retryAfterSeconds.
func SecondaryRateLimit(method, path string, retryAfterSeconds int) Fault {
	return Fault{Method: method, Path: path, Status: http.StatusForbidden,
		Header: map[string]string{"Retry-After": strconv.Itoa(retryAfterSeconds)}}
}

// ghPrefixes are the roots the API answers under: github.com style and
// GitHub Enterprise style.
var ghPrefixes = []string{"", "/api/v3"}

func (g *GitHub) handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		method, path, _ := strings.Cut(pattern, " ")
		for _, p := range ghPrefixes {
			mux.HandleFunc(method+" "+p+path, h)
		}
	}
	route("GET /user", g.getUser)
	route("GET /repos/{owner}/{repo}/issues", g.listIssues)
	route("GET /repos/{owner}/{repo}/issues/{number}", g.getIssue)
	route("GET /repos/{owner}/{repo}", g.getRepo)
	route("GET /repos/{owner}/{repo}/pulls", g.listPulls)
	route("POST /repos/{owner}/{repo}/pulls", g.createPull)
	route("GET /repos/{owner}/{repo}/pulls/{number}", g.getPull)
	route("PATCH /repos/{owner}/{repo}/pulls/{number}", g.updatePull)
	route("GET /repos/{owner}/{repo}/issues/{number}/comments", g.listComments)
	route("POST /repos/{owner}/{repo}/issues/{number}/comments", g.createComment)
	route("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", g.editComment)
	route("DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}", g.deleteComment)
	route("GET /repos/{owner}/{repo}/issues/{number}/labels", g.listLabels)
	route("GET /repos/{owner}/{repo}/issues/{number}/events", g.listEvents)
	route("POST /repos/{owner}/{repo}/issues/{number}/labels", g.addLabels)
	route("DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}", g.removeLabel)
	route("GET /search/issues", g.searchIssues)
	route("GET /repos/{owner}/{repo}/collaborators/{username}/permission", g.getPermission)
	route("POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", g.createReaction)
	route("GET /repos/{owner}/{repo}/labels", g.listRepoLabels)
	route("POST /repos/{owner}/{repo}/labels", g.createRepoLabel)
	route("GET /app", g.getApp)
	route("GET /repos/{owner}/{repo}/installation", g.getRepoInstallation)
	route("GET /orgs/{owner}/installation", g.getAccountInstallation)
	route("GET /users/{owner}/installation", g.getAccountInstallation)
	route("POST /app/installations/{id}/access_tokens", g.createInstallationToken)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		g.fail(w, http.StatusNotFound, "Not Found")
	})
	inner := g.wrap(g.guard(mux), ghErrorBody)
	git := g.wrap(g.GitRepos, gitErrBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// git at /{owner}/{repo}.git/..., beside the web pages on github.com.
		if name, _, ok := gitPath(r.URL.Path); ok && strings.Count(name, "/") == 1 {
			git.ServeHTTP(w, r)
			return
		}
		// Rate-limit headers go on every answer, injected faults included.
		g.st.Lock()
		g.rateHeadersLocked(w.Header(), ghResource(r.URL.Path))
		g.st.Unlock()
		inner.ServeHTTP(w, r)
	})
}

// guard checks the token and the primary rate limit.
func (g *GitHub) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			g.fail(w, http.StatusUnauthorized, "Requires authentication")
			return
		}
		if appPath(r.URL.Path) {
			// The app's endpoints take its JWT, never a token.
			if msg, ok := g.checkJWT(r); !ok {
				g.fail(w, http.StatusUnauthorized, msg)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			tok, _ = strings.CutPrefix(auth, "token ")
		}
		g.st.Lock()
		accepted, installation := g.acceptsLocked(tok), g.installationTokenLocked(tok)
		g.st.Unlock()
		if !accepted {
			g.fail(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		if installation && strings.TrimPrefix(r.URL.Path, "/api/v3") == "/user" {
			g.fail(w, http.StatusForbidden, "Resource not accessible by integration")
			return
		}
		g.st.Lock()
		rt := g.rateLocked(ghResource(r.URL.Path))
		exhausted := rt.used >= rt.limit
		g.st.Unlock()
		if exhausted {
			b, _ := json.Marshal(map[string]any{
				"message": "API rate limit exceeded for user ID 1001.", "documentation_url": ghDocsRateLimit, "status": "403"})
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write(b)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func ghResource(path string) string {
	path = strings.TrimPrefix(path, "/api/v3")
	if strings.HasPrefix(path, "/search/") {
		return "search"
	}
	return "core"
}

// rateHeadersLocked writes the X-RateLimit-* headers of a resource.
func (g *GitHub) rateHeadersLocked(h http.Header, resource string) {
	rt := g.rateLocked(resource)
	now := g.clock()
	if rt.reset.IsZero() || !now.Before(rt.reset) {
		rt.reset = now.Add(rt.window).Truncate(time.Second)
		rt.used = 0
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(rt.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(rt.limit-rt.used, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(rt.reset.Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(rt.used))
	h.Set("X-RateLimit-Resource", resource)
}

// reply writes v as JSON with an ETag. A GET whose If-None-Match matches
// answers 304 without a body and without spending the rate limit, as on
// GitHub. Callers hold g.st.
func (g *GitHub) reply(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic("forgetest: encoding reply: " + err.Error())
	}
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	if r.Method == http.MethodGet && ghETagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	resource := ghResource(r.URL.Path)
	g.rateLocked(resource).used++
	g.rateHeadersLocked(h, resource)
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func ghETagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	weak := strings.TrimPrefix(etag, "W/")
	for c := range strings.SplitSeq(header, ",") {
		c = strings.TrimSpace(c)
		if c == "*" || c == etag || strings.TrimPrefix(c, "W/") == weak {
			return true
		}
	}
	return false
}

// fail writes GitHub's error JSON.
func (g *GitHub) fail(w http.ResponseWriter, status int, message string) {
	g.failDoc(w, status, message, "https://docs.github.com/rest")
}

func (g *GitHub) failDoc(w http.ResponseWriter, status int, message, doc string) {
	b, _ := json.Marshal(map[string]any{"message": message, "documentation_url": doc, "status": strconv.Itoa(status)})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// validationFailed writes GitHub's 422 body.
func (g *GitHub) validationFailed(w http.ResponseWriter, resource, field, message string) {
	b, _ := json.Marshal(map[string]any{
		"message": "Validation Failed",
		"errors": []map[string]any{
			{"resource": resource, "field": field, "code": "invalid", "message": message},
		},
		"documentation_url": "https://docs.github.com/rest", "status": "422",
	})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_, _ = w.Write(b)
}

// ghPaging reads per_page (default 30, at most 100) and page (from 1).
func ghPaging(r *http.Request) (perPage, page int) {
	q := r.URL.Query()
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage < 1 {
		perPage = 30
	}
	perPage = min(perPage, 100)
	page, err = strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	return perPage, page
}

// ghPage cuts one page out of items and sets the RFC 5988 Link header
// (prev, next, last, first, in GitHub's order). reachable caps how many
// items can be paged through (the search API's 1000); 0 means all.
func ghPage[T any](w http.ResponseWriter, r *http.Request, items []T, reachable int) []T {
	perPage, page := ghPaging(r)
	n := len(items)
	if reachable > 0 {
		n = min(n, reachable)
	}
	last := max((n+perPage-1)/perPage, 1)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		return "<" + u.String() + `>; rel="` + rel + `"`
	}
	var links []string
	if page > 1 {
		links = append(links, link(min(page-1, last), "prev"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	start := (page - 1) * perPage
	if start >= n {
		return []T{}
	}
	return items[start:min(start+perPage, n)]
}

// ghURLs are the roots links in payloads are built from: the API root the
// request came in on and the web root.
type ghURLs struct {
	api  string
	html string
}

func ghURLsFor(r *http.Request) ghURLs {
	root := "http://" + r.Host
	if strings.HasPrefix(r.URL.Path, "/api/v3/") {
		return ghURLs{api: root + "/api/v3", html: root}
	}
	return ghURLs{api: root, html: root}
}
