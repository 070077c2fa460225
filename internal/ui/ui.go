// Package ui serves the task pages: /tasks lists the tasks the store knows,
// /tasks/{forge}/{repo}/{number} shows one task as a timeline of what its
// runs did (store.Event). Plain HTML from html/template with its style
// embedded; no script. Every page needs the token (server.ui_token): a
// request without it is answered 401 and nothing else.
package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Store is what the pages read.
type Store interface {
	List(ctx context.Context) ([]store.Record, error)
	Get(ctx context.Context, ref task.Ref) (store.Record, error)
	Events(ctx context.Context, ref task.Ref, kinds ...string) ([]store.Event, error)
}

// Options configure the pages.
type Options struct {
	Store Store
	// Token is what a request must carry: "Authorization: Bearer <token>",
	// the cookie the pages set, or ?token= once (answered with the cookie
	// and a redirect without it). Required.
	Token  string
	Logger *slog.Logger
	Now    func() time.Time
}

//go:embed templates/*.html templates/style.css
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"dur":    duration,
	"stamp":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"offset": func(d time.Duration) string { return "+" + duration(d) },
	"lines":  firstLines,
	"long":   func(s string) bool { return s != firstLines(s) },
	"path":   Path,
	"css":    func() template.CSS { b, _ := files.ReadFile("templates/style.css"); return template.CSS(b) },
}).ParseFS(files, "templates/*.html"))

// cookie is the name of the cookie that carries the token.
const cookie = "coding_agent_ui"

// Handler serves the pages.
type Handler struct {
	o   Options
	mux *http.ServeMux
}

// New returns the pages' handler; it answers GET /tasks and GET /tasks/….
func New(o Options) (*Handler, error) {
	if len(o.Token) < 16 {
		return nil, errors.New("ui: a token of at least 16 characters is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /tasks", h.list)
	h.mux.HandleFunc("GET /tasks/{rest...}", h.task)
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.allowed(w, r) {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	// No script, no frame, nothing from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

// allowed checks the token, from the header, the cookie or the query (which
// sets the cookie and redirects to the page without it); false has answered.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request) bool {
	if t := r.URL.Query().Get("token"); t != "" && h.is(t) {
		http.SetCookie(w, &http.Cookie{Name: cookie, Value: t, Path: "/tasks", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			Secure: r.TLS != nil})
		q := r.URL.Query()
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && h.is(a) {
		return true
	}
	if c, err := r.Cookie(cookie); err == nil && h.is(c.Value) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="coding-agent"`)
	http.Error(w, "401 Unauthorized", http.StatusUnauthorized)
	return false
}

func (h *Handler) is(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(h.o.Token)) == 1
}

// Path is a task's page, under /tasks: its forge, its repository, and its
// number ("!" before a pull or merge request's).
func Path(ref task.Ref) string {
	n := strconv.Itoa(ref.Number)
	if ref.Kind == task.PullRequest || ref.Kind == task.MergeRequest {
		n = "!" + n
	}
	parts := []string{"/tasks", url.PathEscape(ref.Forge)}
	for _, p := range strings.Split(ref.Repo, "/") {
		parts = append(parts, url.PathEscape(p))
	}
	return strings.Join(append(parts, n), "/")
}

// refOf reads a task page's path after /tasks/.
func refOf(rest string) (task.Ref, error) {
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	if len(parts) < 3 {
		return task.Ref{}, errors.New("want /tasks/{forge}/{repository}/{number}")
	}
	n := parts[len(parts)-1]
	sep := "#"
	if m, ok := strings.CutPrefix(n, "!"); ok {
		n, sep = m, "!"
	}
	return task.ParseRef(parts[0] + ":" + strings.Join(parts[1:len(parts)-1], "/") + sep + n)
}

// row is a task in the list.
type row struct {
	store.Record
	Path     string
	Took     time.Duration
	Ref      string
	Provider string
	URL      string // on the forge, as its first run recorded it
}

// maxRows bounds the list: the most recently updated tasks first, the
// filters reach the others.
const maxRows = 200

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	recs, err := h.o.Store.List(r.Context())
	if err != nil {
		h.fail(w, "listing the tasks", err)
		return
	}
	state, repo := r.URL.Query().Get("state"), r.URL.Query().Get("repo")
	var rows []row
	var repos []string
	more := 0
	for _, rec := range recs {
		if !slices.Contains(repos, rec.Ref.Repo) {
			repos = append(repos, rec.Ref.Repo)
		}
		if (state != "" && string(rec.Status) != state) || (repo != "" && rec.Ref.Repo != repo) {
			continue
		}
		if len(rows) == maxRows {
			more++
			continue
		}
		rows = append(rows, row{Record: rec, Path: Path(rec.Ref), Took: rec.UpdatedAt.Sub(rec.CreatedAt), Ref: rec.Ref.String(),
			Provider: strings.Trim(rec.Provider+"/"+rec.Model, "/")})
	}
	for i := range rows { // a run's start holds the task's address on the forge
		rounds, err := h.o.Store.Events(r.Context(), rows[i].Record.Ref, store.EventRound)
		if err != nil {
			h.fail(w, "reading the tasks' events", err)
			return
		}
		if j := slices.IndexFunc(rounds, func(e store.Event) bool { return e.URL != "" }); j >= 0 {
			rows[i].URL = rounds[j].URL
		}
	}
	slices.Sort(repos)
	var states []string
	for _, s := range task.Statuses {
		states = append(states, string(s))
	}
	h.render(w, "list.html", map[string]any{"Rows": rows, "More": more, "State": state, "Repo": repo, "States": states, "Repos": repos,
		"Now": h.o.Now()})
}

func (h *Handler) task(w http.ResponseWriter, r *http.Request) {
	ref, err := refOf(r.PathValue("rest"))
	if err != nil {
		http.Error(w, "404 Not Found: "+err.Error(), http.StatusNotFound)
		return
	}
	rec, err := h.o.Store.Get(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "404 Not Found: no task "+ref.String(), http.StatusNotFound)
		return
	}
	if err != nil {
		h.fail(w, "reading the task", err)
		return
	}
	events, err := h.o.Store.Events(r.Context(), ref)
	if err != nil {
		h.fail(w, "reading the task's events", err)
		return
	}
	if k := r.URL.Query().Get("event"); k != "" {
		i, err := strconv.Atoi(k)
		if err != nil {
			http.Error(w, "400 Bad Request: event must be a number", http.StatusBadRequest)
			return
		}
		if i < 0 || i >= len(events) {
			http.Error(w, "404 Not Found: no such event", http.StatusNotFound)
			return
		}
		// One event's whole text, as plain text: a long result is a
		// click away rather than in every load of the page.
		e := events[i]
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s · %s · %s\n\n", ref, e.Kind, e.Title)
		if e.Args != "" {
			fmt.Fprintf(w, "%s\n\n", e.Args)
		}
		fmt.Fprint(w, e.Text)
		return
	}
	h.render(w, "task.html", timeline(rec, events))
}

func (h *Handler) render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		h.fail(w, "rendering "+name, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, b.String())
}

func (h *Handler) fail(w http.ResponseWriter, what string, err error) {
	h.o.Logger.Error("task pages: "+what, "error", err)
	http.Error(w, "500 Internal Server Error: "+what+" failed (see the log)", http.StatusInternalServerError)
}

// duration is d for people: 850ms, 12s, 3m05s, 2h04m.
func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// shownLines is how many lines of a result the timeline shows before "more".
const shownLines = 8

// firstLines is s's first lines (shownLines), the whole when it is short.
func firstLines(s string) string {
	ls := strings.SplitN(s, "\n", shownLines+1)
	if len(ls) <= shownLines && len(s) <= 1200 {
		return s
	}
	head := strings.Join(ls[:min(len(ls), shownLines)], "\n")
	if len(head) > 1200 {
		head = head[:1200]
		for !utf8.ValidString(head) {
			head = head[:len(head)-1]
		}
	}
	return head
}
