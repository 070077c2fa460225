// Package httpx holds the one retry layer every outbound HTTP call goes
// through: the forges and the model providers. A transient failure (5xx,
// 429, GitHub's secondary rate limit, a timeout, a reset connection, a
// success whose body should be JSON but is cut short, stalls or is not JSON
// at all) is retried at most Options.MaxRetries times (3: four attempts in
// all), waiting no less than Retry-After or the rate-limit reset says. The
// waiting rules (Sleep, Backoff, RateLimited, ServerWait, RetryAfter) are
// exported for the forge adapters, which retry their comment POSTs
// themselves.
package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options configures the retrying transport. Zero values mean defaults.
type Options struct {
	// MaxRetries is how many times a failed attempt is retried; 0 → 3.
	// Negative means no retries.
	MaxRetries int
	// BaseDelay is the first backoff delay, doubled each retry; 0 → 1s.
	BaseDelay time.Duration
	// MaxDelay caps one computed backoff delay; 0 → 30s.
	MaxDelay time.Duration
	// MaxWait is the longest server-requested wait (Retry-After, rate-limit
	// reset) that is honoured; a longer one ends the retries at once; 0 → 2m.
	MaxWait time.Duration
	// AttemptTimeout bounds one attempt, headers and body; 0 → none.
	AttemptTimeout time.Duration
	// RetryUnsafe retries POST and PATCH too: for calls without side
	// effects (a model completion). Otherwise those are retried only when
	// the request is marked with Idempotent; the caller retries the rest.
	RetryUnsafe bool
	// JSON says that every success should carry JSON, whatever its
	// Content-Type: the forges' REST APIs and the model servers answer
	// nothing else, so an HTML page answered 200 (a proxy, a login wall)
	// is a failure to retry. Without it only answers that say they are
	// JSON, or whose request asked for JSON alone, are checked.
	JSON bool
	// Base is the underlying transport; nil → http.DefaultTransport.
	Base http.RoundTripper
	// Logger receives one warning per retry; nil → discard.
	Logger *slog.Logger
	// Sleep waits d or until ctx ends; nil → a timer. Tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used for rate-limit resets; nil → time.Now.
	Now func() time.Time
}

type idempotentKey struct{}

// Idempotent marks requests made with ctx as safe to repeat (adding a label
// with POST, say), so the transport retries them like a GET.
func Idempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

// NewClient returns an http.Client whose transport retries as opts says.
func NewClient(opts Options) *http.Client {
	return &http.Client{Transport: NewTransport(opts)}
}

// NewTransport returns the retrying round tripper.
func NewTransport(opts Options) http.RoundTripper {
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 3
	}
	if opts.MaxRetries < 0 {
		opts.MaxRetries = 0
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = time.Second
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 30 * time.Second
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 2 * time.Minute
	}
	if opts.Base == nil {
		opts.Base = http.DefaultTransport
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Sleep == nil {
		opts.Sleep = Sleep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &transport{o: opts}
}

// ErrWaitTooLong is returned (wrapped) when the server asks to wait longer
// than Options.MaxWait.
var ErrWaitTooLong = errors.New("server asked to wait longer than allowed")

type transport struct{ o Options }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := snapshotBody(req)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		resp, err := t.attempt(req, body)
		retry, wait := t.classify(req, resp, err, attempt)
		if !retry || attempt >= t.o.MaxRetries {
			return resp, err
		}
		if wait > t.o.MaxWait {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, fmt.Errorf("%s %s: %w (%s)", req.Method, req.URL.Redacted(), ErrWaitTooLong, wait.Round(time.Second))
		}
		t.o.Logger.Warn("retrying HTTP request", "method", req.Method, "host", req.URL.Host,
			"path", req.URL.Path, "attempt", attempt+1, "wait", wait.String(), "cause", describe(resp, err))
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if err := t.o.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// attempt sends one try, with its own timeout if configured. The body of a
// success that should be JSON is read and checked within the attempt when
// the request may be retried, so that an answer cut short, stalled
// mid-body or not JSON at all is retried like a 5xx.
func (t *transport) attempt(req *http.Request, body []byte) (*http.Response, error) {
	r := req.Clone(req.Context())
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if t.o.AttemptTimeout > 0 {
		ctx, cancel = context.WithTimeoutCause(req.Context(), t.o.AttemptTimeout, errAttemptTimeout)
	} else {
		ctx, cancel = context.WithCancel(req.Context())
	}
	resp, err := t.o.Base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, t.timedOut(ctx, req, err)
	}
	if want, lines := shouldBeJSON(req, resp, t.o.JSON); want && t.retryable(req) {
		if err := readChecked(resp, lines, cancel); err != nil {
			return nil, t.timedOut(ctx, req, err)
		}
		return resp, nil
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// timedOut names the attempt's own timeout as the cause of err when it
// was (and not the caller's context).
func (t *transport) timedOut(ctx context.Context, req *http.Request, err error) error {
	if context.Cause(ctx) != errAttemptTimeout || req.Context().Err() != nil {
		return err
	}
	if errors.Is(err, errReadBody) {
		return fmt.Errorf("%w after %s, in the middle of the answer", errAttemptTimeout, t.o.AttemptTimeout)
	}
	return fmt.Errorf("%w after %s", errAttemptTimeout, t.o.AttemptTimeout)
}

var errAttemptTimeout = errors.New("attempt timed out")

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelBody) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// classify says whether the outcome is worth another attempt and how long
// to wait first.
func (t *transport) classify(req *http.Request, resp *http.Response, err error, attempt int) (bool, time.Duration) {
	if req.Context().Err() != nil {
		return false, 0
	}
	backoff := t.backoff(attempt)
	if !t.retryable(req) {
		// A POST that may have side effects is the caller's to retry (the
		// forge adapters check whether a comment landed before re-posting).
		return false, 0
	}
	if err != nil {
		return transient(err), backoff
	}
	if RateLimited(resp) {
		wait, _ := ServerWait(resp, t.o.Now())
		if w, ok := req.Context().Value(waitsKey{}).(*Waits); ok {
			w.note(wait)
		}
		return true, max(wait, backoff)
	}
	if resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented {
		return true, backoff
	}
	return false, 0
}

// retryable reports whether req may be sent again: it has no side effects
// to repeat.
func (t *transport) retryable(req *http.Request) bool {
	return t.o.RetryUnsafe || req.Context().Value(idempotentKey{}) != nil ||
		req.Method == http.MethodGet || req.Method == http.MethodHead ||
		req.Method == http.MethodPut || req.Method == http.MethodDelete || req.Method == http.MethodOptions
}

func (t *transport) backoff(attempt int) time.Duration {
	d := Backoff(attempt, t.o.BaseDelay, t.o.MaxDelay)
	// Up to 20% jitter so that several workers do not retry in step.
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// transient reports whether a transport error is worth retrying.
func transient(err error) bool {
	if errors.Is(err, errAttemptTimeout) || errors.Is(err, ErrBadBody) || errors.Is(err, errReadBody) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) // resets, broken pipes, refused connections
}

func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// snapshotBody reads the request body once so each attempt can resend it.
func snapshotBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("reading request body of %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	return b, nil
}

// Waits records the longest wait a rate-limited server asked for during
// the requests made with a context from RecordWaits, so a caller that gives
// up on them (the retries spent, or the wait longer than MaxWait) can wait
// that long before asking again.
type Waits struct {
	mu      sync.Mutex
	longest time.Duration
}

type waitsKey struct{}

// RecordWaits returns a context whose requests record the waits servers
// ask for in the returned Waits.
func RecordWaits(ctx context.Context) (context.Context, *Waits) {
	w := &Waits{}
	return context.WithValue(ctx, waitsKey{}, w), w
}

// Longest is the longest wait asked for so far (0 when none).
func (w *Waits) Longest() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

func (w *Waits) note(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest = max(w.longest, d)
}
