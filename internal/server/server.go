// Package server is the HTTP listener of `serve`: the GitHub and GitLab
// webhooks, which wake the producer or a task's checks at once instead of
// at the next poll, and /healthz, /readyz and /metrics for whoever runs the
// process. A webhook only signals: the claim, the checks and the work stay
// in the poll loops, which remain the fallback and the repair for a
// delivery that never came.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/coding-agent/coding-agent/internal/task"
)

// Events is what a webhook may ask of the process. Both return at once:
// they signal the loops that do the work.
type Events interface {
	// Labelled: ref may ask for the agent now (the bot label was added, or
	// the paused label removed); the producer makes a pass.
	Labelled(ref task.Ref)
	// Commented: someone commented on ref; the checkpoint check of its run,
	// or the judge of the replies it awaits, looks now.
	Commented(ref task.Ref)
}

// Options configure the listener's handler.
type Options struct {
	// GitHubSecret verifies POST /webhooks/github (X-Hub-Signature-256);
	// empty: the path is not served.
	GitHubSecret string
	// GitLabToken verifies POST /webhooks/gitlab (X-Gitlab-Token); empty:
	// the path is not served.
	GitLabToken string
	// Labels' Bot and Paused say which label changes ask for the agent.
	Labels task.Labels
	// Watched reports whether the process works on the repository (GitHub
	// "owner/name") or project (GitLab path; id its numeric id); events
	// for any other are ignored. nil: all are watched.
	Watched func(forge, repo string, id int64) bool
	Events  Events
	// Self reports whether a comment's author is the bot itself: its own
	// comments (one or more a step) wake nothing. nil: none is.
	Self func(author string) bool
	// Ready says why the process is not ready; nil when it is. nil: always
	// ready.
	Ready func(ctx context.Context) error
	// Delivered, when set, is told each delivery's forge and result
	// (Accepted, Ignored, Duplicate, Unauthorized, Malformed).
	Delivered func(forge, result string)
	// Metrics serves GET /metrics; nil: not served.
	Metrics http.Handler
	// Deliveries is how many delivery ids are remembered to ignore a
	// delivery that comes again; 0 → 4096.
	Deliveries int
	Logger     *slog.Logger
}

// maxBody is the most a webhook body may hold: GitHub caps its payloads
// at 25 MB.
const maxBody = 25 << 20

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// Handler serves the listener's paths.
type Handler struct {
	o    Options
	seen *deliveries
	mux  *http.ServeMux
}

// New returns the handler of the listener.
func New(o Options) *Handler {
	if o.Deliveries <= 0 {
		o.Deliveries = 4096
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Watched == nil {
		o.Watched = func(string, string, int64) bool { return true }
	}
	if o.Delivered == nil {
		o.Delivered = func(string, string) {}
	}
	if o.Self == nil {
		o.Self = func(string) bool { return false }
	}
	h := &Handler{o: o, seen: newDeliveries(o.Deliveries), mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.ready)
	if o.Metrics != nil {
		h.mux.Handle("GET /metrics", o.Metrics)
	}
	if o.GitHubSecret != "" {
		h.mux.Handle("POST /webhooks/github", h.webhook(github{secret: []byte(o.GitHubSecret), labels: o.Labels}))
	}
	if o.GitLabToken != "" {
		h.mux.Handle("POST /webhooks/gitlab", h.webhook(gitlab{token: o.GitLabToken, labels: o.Labels}))
	}
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) ready(w http.ResponseWriter, r *http.Request) {
	if h.o.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := h.o.Ready(ctx); err != nil {
			reply(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
	}
	reply(w, http.StatusOK, "ready")
}

func reply(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// action is what one delivery asks.
type action int

const (
	ignore action = iota
	labelled
	commented
)

// event is a delivery as the listener reads it.
type event struct {
	what   action
	ref    task.Ref
	id     int64  // GitLab's numeric project id; 0 on GitHub
	author string // a comment's author
	why    string // why it is ignored
}

// forgeHooks verifies and reads one forge's deliveries.
type forgeHooks interface {
	name() string
	// verify reports whether the delivery carries the forge's proof.
	verify(r *http.Request, body []byte) bool
	// ids are the delivery's ids: it is a duplicate when one was seen.
	ids(r *http.Request) []string
	// read turns the delivery into an event; an error is a malformed body.
	read(r *http.Request, body []byte) (event, error)
}

// Results of a delivery, as Options.Delivered is told.
const (
	Accepted     = "accepted"     // 202: the loops were signalled
	Ignored      = "ignored"      // 200: nothing to do
	Duplicate    = "duplicate"    // 200: delivered before
	Unauthorized = "unauthorized" // 401: no or a wrong signature or token
	Malformed    = "malformed"    // 400 or 413: unreadable, or too large
)

// webhook serves one forge's deliveries. Answers: 401 unverified (nothing
// is read or remembered), 400 malformed, 413 too large, 202 acted on (the
// loops were signalled), 200 ignored (another event, another repository,
// or a delivery seen before), each with a line saying which.
func (h *Handler) webhook(f forgeHooks) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, result, msg := h.deliver(f, w, r)
		h.o.Delivered(f.name(), result)
		reply(w, status, msg)
	})
}

// deliver verifies, reads and acts on one delivery; it returns the answer
// and the result.
func (h *Handler) deliver(f forgeHooks, w http.ResponseWriter, r *http.Request) (int, string, string) {
	log := h.o.Logger.With("forge", f.name(), "delivery", firstOf(f.ids(r)))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, Malformed, "payload too large"
		}
		return http.StatusBadRequest, Malformed, "reading the payload: " + err.Error()
	}
	if !f.verify(r, body) {
		log.Warn("webhook delivery refused: missing or wrong signature", "remote", r.RemoteAddr)
		return http.StatusUnauthorized, Unauthorized, "signature missing or wrong"
	}
	ev, err := f.read(r, body)
	if err != nil {
		log.Warn("webhook delivery refused: malformed payload", "error", err)
		return http.StatusBadRequest, Malformed, err.Error()
	}
	switch {
	case ev.what != ignore && !h.o.Watched(ev.ref.Forge, ev.ref.Repo, ev.id):
		ev = event{why: fmt.Sprintf("%s is not a configured repository", ev.ref.Repo)}
	case ev.what == commented && h.o.Self(ev.author):
		ev = event{why: "the bot's own comment"}
	}
	if !h.seen.add(f.name(), f.ids(r)) {
		log.Info("webhook delivery ignored: delivered before")
		return http.StatusOK, Duplicate, "ignored: duplicate delivery"
	}
	switch ev.what {
	case labelled:
		log.Info("webhook: task may ask for the agent; producer woken", "task", ev.ref.String())
		h.o.Events.Labelled(ev.ref)
	case commented:
		log.Info("webhook: comment on task; its checks woken", "task", ev.ref.String())
		h.o.Events.Commented(ev.ref)
	default:
		log.Debug("webhook delivery ignored", "reason", ev.why)
		return http.StatusOK, Ignored, "ignored: " + ev.why
	}
	return http.StatusAccepted, Accepted, "accepted: " + ev.ref.String()
}

func firstOf(s []string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
