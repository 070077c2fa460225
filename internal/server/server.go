// Package server is the HTTP listener of `serve`: the forges' webhooks
// (each read by its adapter's forge.Hooks), which wake the producer or a task's checks at once instead of
// at the next poll, and /healthz, /readyz and /metrics for whoever runs the
// process. A webhook only signals: the claim, the checks and the work stay
// in the poll loops, which remain the fallback and the repair for a
// delivery that never came.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
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
	// Webhooks are the forges' webhooks served, each at POST
	// /webhooks/{forge}.
	Webhooks []Webhook
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
	// Pages serves GET /tasks and the task pages under it (internal/ui,
	// which asks for its token); nil: not served.
	Pages http.Handler
	// Deliveries is how many deliveries (their ids and their bodies' digests)
	// are remembered to ignore a delivery that comes again; 0 → 4096.
	Deliveries int
	// Reading is how many deliveries' bodies are read at once; a delivery
	// over it is answered 503 with Retry-After, its body unread. 0 → 8.
	Reading int
	// Now is the clock of the bodies remembered; nil → time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Webhook is one forge's webhook: its deliveries, verified with Secret
// and read by Hooks.
type Webhook struct {
	Forge  string // its name in the path, and the forge of its tasks
	Secret string // the secret (or token) its deliveries prove
	Hooks  forge.Hooks
}

// Limits of what a delivery may make the listener read and keep.
const (
	// maxBody is the most a body is read of: GitHub caps its payloads at
	// 25 MB. The body of an event the listener does not read (a ping, a
	// push) is hashed to verify it, and kept nowhere.
	maxBody = 25 << 20
	// maxKept is the most of a body kept to be read. The events read (an
	// issue, a pull request or merge request, a comment: texts of at most
	// 65536 characters each, and a few small objects) fit in it many
	// times; a longer body is answered 413 as soon as it passes it,
	// unverified, so that what a delivery holds in memory before its
	// proof is checked is at most this.
	maxKept = 1 << 20
	// busyRetry is the Retry-After, in seconds, of a delivery refused for
	// the deliveries being read already.
	busyRetry = "5"
	// bodyMemory is how long a verified body is remembered: the same
	// body again within it is a duplicate, whatever its delivery id (a
	// delivery id is not signed, so a captured delivery could be replayed
	// under new ones).
	bodyMemory = time.Hour
)

// readyTimeout bounds one readiness check.
const readyTimeout = 5 * time.Second

// Handler serves the listener's paths.
type Handler struct {
	o    Options
	seen *deliveries
	mux  *http.ServeMux
	// reading holds a token for each delivery whose body is being read
	// (Options.Reading of them at most).
	reading chan struct{}
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
	if o.Reading <= 0 {
		o.Reading = 8
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, seen: newDeliveries(o.Deliveries, o.Now), mux: http.NewServeMux(), reading: make(chan struct{}, o.Reading)}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("GET /readyz", h.ready)
	if o.Metrics != nil {
		h.mux.Handle("GET /metrics", o.Metrics)
	}
	for _, w := range o.Webhooks {
		h.mux.Handle("POST /webhooks/"+w.Forge, h.webhook(w))
	}
	if o.Pages != nil {
		h.mux.Handle("GET /tasks", o.Pages)
		h.mux.Handle("GET /tasks/", o.Pages)
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

// Results of a delivery, as Options.Delivered is told.
const (
	Accepted     = "accepted"     // 202: the loops were signalled
	Ignored      = "ignored"      // 200: nothing to do
	Duplicate    = "duplicate"    // 200: delivered before
	Unauthorized = "unauthorized" // 401: no or a wrong signature or token
	Malformed    = "malformed"    // 400 or 413: unreadable, or too large
	Busy         = "busy"         // 503: too many deliveries being read; its body was not read
)

// webhook serves one forge's deliveries. Answers: 401 unverified (nothing
// is kept or remembered), 400 malformed, 413 too large, 503 busy (with
// Retry-After), 202 acted on (the loops were signalled), 200 ignored
// (another event, another repository, or a delivery seen before), each
// with a line saying which.
func (h *Handler) webhook(f Webhook) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, result, msg := h.deliver(f, w, r)
		h.o.Delivered(f.Forge, result)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", busyRetry)
		}
		reply(w, status, msg)
	})
}

// deliver verifies, reads and acts on one delivery; it returns the answer
// and the result. The proof in the headers is checked before the body is
// read; the body is verified as it streams in, and kept only when its
// event is read and it fits maxKept, so that a delivery without the
// forge's proof never makes the listener hold more than that.
func (h *Handler) deliver(f Webhook, w http.ResponseWriter, r *http.Request) (int, string, string) {
	log := h.o.Logger.With("forge", f.Forge, "delivery", firstOf(f.Hooks.IDs(r)))
	p, ok := f.Hooks.Admit(r, f.Secret)
	if !ok {
		log.Warn("webhook delivery refused: missing or wrong signature", "remote", r.RemoteAddr)
		return http.StatusUnauthorized, Unauthorized, "signature missing or wrong"
	}
	why, reads := f.Hooks.Reads(r)
	var body []byte
	var digest *[sha256.Size]byte
	if reads || p != nil {
		select {
		case h.reading <- struct{}{}:
			defer func() { <-h.reading }()
		default:
			log.Warn("webhook delivery refused: too many being read", "reading", cap(h.reading), "remote", r.RemoteAddr)
			return http.StatusServiceUnavailable, Busy, "busy: too many deliveries being read; retry later"
		}
		kept, sum, err := readBody(w, r, p, reads)
		if err != nil {
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				log.Warn("webhook delivery refused: too large", "limit", tooLarge.Limit, "remote", r.RemoteAddr)
				return http.StatusRequestEntityTooLarge, Malformed, fmt.Sprintf("payload too large: over %d bytes", tooLarge.Limit)
			}
			return http.StatusBadRequest, Malformed, "reading the payload: " + err.Error()
		}
		if p != nil && !p.Valid() {
			log.Warn("webhook delivery refused: missing or wrong signature", "remote", r.RemoteAddr)
			return http.StatusUnauthorized, Unauthorized, "signature missing or wrong"
		}
		body, digest = kept, &sum
	}
	ev := forge.Ignored(why)
	if reads {
		var err error
		if ev, err = f.Hooks.Read(r, body, h.o.Labels); err != nil {
			log.Warn("webhook delivery refused: malformed payload", "error", err)
			return http.StatusBadRequest, Malformed, err.Error()
		}
	}
	switch {
	case ev.What != forge.Nothing && !h.o.Watched(ev.Ref.Forge, ev.Ref.Repo, ev.ProjectID):
		ev = forge.Ignored(fmt.Sprintf("%s is not a configured repository", ev.Ref.Repo))
	case ev.What == forge.Commented && h.o.Self(ev.Author):
		ev = forge.Ignored("the bot's own comment")
	}
	if !h.seen.add(f.Forge, f.Hooks.IDs(r), digest) {
		log.Info("webhook delivery ignored: delivered before")
		return http.StatusOK, Duplicate, "ignored: duplicate delivery"
	}
	switch ev.What {
	case forge.Labelled:
		log.Info("webhook: task may ask for the agent; producer woken", "task", ev.Ref.String())
		h.o.Events.Labelled(ev.Ref)
	case forge.Commented:
		log.Info("webhook: comment on task; its checks woken", "task", ev.Ref.String())
		h.o.Events.Commented(ev.Ref)
	default:
		log.Debug("webhook delivery ignored", "reason", ev.Why)
		return http.StatusOK, Ignored, "ignored: " + ev.Why
	}
	return http.StatusAccepted, Accepted, "accepted: " + ev.Ref.String()
}

// readBody reads r's body through p (nil: nothing to verify) and a
// SHA-256 digest, and returns the body when keep, with the digest. A body
// kept may hold maxKept bytes, one hashed only maxBody: reading stops
// with an *http.MaxBytesError past that, or at once when Content-Length
// says so.
func readBody(w http.ResponseWriter, r *http.Request, p forge.Proof, keep bool) ([]byte, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	limit := int64(maxBody)
	if keep {
		limit = maxKept
	}
	if r.ContentLength > limit {
		return nil, sum, &http.MaxBytesError{Limit: limit}
	}
	digest := sha256.New()
	to := []io.Writer{digest}
	if p != nil {
		to = append(to, p)
	}
	kept := &blocks{size: blockSize}
	if keep {
		if r.ContentLength > 0 {
			kept.size = int(r.ContentLength)
		}
		to = append(to, kept)
	}
	if _, err := io.Copy(io.MultiWriter(to...), http.MaxBytesReader(w, r.Body, limit)); err != nil {
		return nil, sum, err
	}
	digest.Sum(sum[:0])
	if !keep {
		return nil, sum, nil
	}
	return kept.bytes(), sum, nil
}

// blockSize is the block a body of unknown length is kept in.
const blockSize = 32 << 10

// blocks keeps what is written to it in blocks of size bytes, so that
// what it holds before the body is verified is what it was given, rounded
// up to a block: no copies grown by doubling.
type blocks struct {
	size int
	b    [][]byte
}

func (k *blocks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(k.b) == 0 || len(k.b[len(k.b)-1]) == cap(k.b[len(k.b)-1]) {
			k.b = append(k.b, make([]byte, 0, k.size))
		}
		last := &k.b[len(k.b)-1]
		m := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:m]...)
		p = p[m:]
	}
	return n, nil
}

// bytes is what was written, in one piece.
func (k *blocks) bytes() []byte {
	if len(k.b) == 1 {
		return k.b[0]
	}
	return bytes.Join(k.b, nil)
}

func firstOf(s []string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
