package httpx

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The waiting rules shared by the transport and by the forge adapters,
// which retry their own comment POSTs.

// Sleep waits d or until ctx ends, whichever comes first. It returns nil
// after d, else ctx's cause (ctx.Err() unless a cause was given).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Backoff is the exponential delay before retry number retry (0 for the
// first): base doubled retry times, capped at limit. A limit of zero or
// less means no cap short of overflow.
func Backoff(retry int, base, limit time.Duration) time.Duration {
	d := base
	for range retry {
		if d > math.MaxInt64/2 || (limit > 0 && d >= limit) {
			break
		}
		d *= 2
	}
	if limit > 0 && d > limit {
		d = limit
	}
	return d
}

// RateLimited reports whether resp refuses the request for its rate: a
// 429, or GitHub's 403 that carries Retry-After (its secondary limit) or
// X-RateLimit-Remaining: 0 (its exhausted quota). A plain 403 is not.
func RateLimited(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0"
	}
	return false
}

// ServerWait is how long resp asks the client to wait before trying again:
// its Retry-After whatever the status (a 503 may carry one), else, when
// resp is RateLimited, the reset of the limit: GitHub's X-RateLimit-Reset
// or GitLab's RateLimit-Reset, an epoch second (a value too small to be
// one is taken as seconds to wait). ok is false when resp names no wait.
// A moment already past is a zero wait.
func ServerWait(resp *http.Response, now time.Time) (wait time.Duration, ok bool) {
	if wait, ok := RetryAfter(resp, now); ok {
		return wait, true
	}
	if !RateLimited(resp) {
		return 0, false
	}
	for _, h := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		sec, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get(h)), 10, 64)
		if err != nil {
			continue
		}
		if sec < 1_000_000_000 {
			return max(time.Duration(sec)*time.Second, 0), true
		}
		return max(time.Unix(sec, 0).Sub(now), 0), true
	}
	return 0, false
}

// RetryAfter reads resp's Retry-After header alone: delay-seconds or an
// HTTP date. ok is false for a nil resp, a missing header or one that
// does not parse.
func RetryAfter(resp *http.Response, now time.Time) (wait time.Duration, ok bool) {
	if resp == nil {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if sec, err := strconv.Atoi(v); err == nil && sec >= 0 {
		return time.Duration(sec) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}
