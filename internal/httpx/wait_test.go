package httpx

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleepWaitsOrStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), time.Hour); err != nil || time.Since(start) != time.Hour {
			t.Errorf("slept %s, err %v; want 1h, nil", time.Since(start), err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Minute, cancel)
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) != time.Minute {
			t.Errorf("slept %s, err %v; want 1m, context.Canceled", time.Since(start), err)
		}
		cause := errors.New("shutting down")
		ctx, cancelCause := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancelCause(cause) })
		if err := Sleep(ctx, time.Hour); !errors.Is(err, cause) {
			t.Errorf("err %v; want the cancel cause", err)
		}
	})
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		retry       int
		base, limit time.Duration
		want        time.Duration
	}{
		{0, time.Second, 30 * time.Second, time.Second},
		{1, time.Second, 30 * time.Second, 2 * time.Second},
		{2, time.Second, 30 * time.Second, 4 * time.Second},
		{5, time.Second, 30 * time.Second, 30 * time.Second},
		{-1, time.Second, 30 * time.Second, time.Second},
		{3, time.Second, 0, 8 * time.Second},
		{200, time.Second, time.Minute, time.Minute},
		{200, time.Second, 0, time.Second << 33}, // the last doubling that fits
	} {
		if got := Backoff(tc.retry, tc.base, tc.limit); got != tc.want {
			t.Errorf("Backoff(%d, %s, %s) = %s, want %s", tc.retry, tc.base, tc.limit, got, tc.want)
		}
	}
}

func response(status int, h map[string]string) *http.Response {
	r := &http.Response{StatusCode: status, Header: http.Header{}}
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return r
}

func TestRateLimited(t *testing.T) {
	for name, tc := range map[string]struct {
		resp *http.Response
		want bool
	}{
		"429":                  {response(429, nil), true},
		"github secondary 403": {response(403, map[string]string{"Retry-After": "60"}), true},
		"github quota 403":     {response(403, map[string]string{"X-RateLimit-Remaining": "0"}), true},
		"plain 403":            {response(403, map[string]string{"X-RateLimit-Remaining": "12"}), false},
		"503 with retry-after": {response(503, map[string]string{"Retry-After": "5"}), false},
		"no response":          {nil, false},
	} {
		if got := RateLimited(tc.resp); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestServerWait(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)
	for name, tc := range map[string]struct {
		resp *http.Response
		want time.Duration
		ok   bool
	}{
		"seconds":              {response(429, map[string]string{"Retry-After": "7"}), 7 * time.Second, true},
		"padded seconds":       {response(429, map[string]string{"Retry-After": " 7 "}), 7 * time.Second, true},
		"date":                 {response(503, map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}), 90 * time.Second, true},
		"retry-after first":    {response(429, map[string]string{"Retry-After": "7", "X-RateLimit-Reset": reset}), 7 * time.Second, true},
		"gitlab reset":         {response(429, map[string]string{"RateLimit-Reset": reset}), 30 * time.Second, true},
		"github quota reset":   {response(403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}), 30 * time.Second, true},
		"reset as a delay":     {response(429, map[string]string{"RateLimit-Reset": "12"}), 12 * time.Second, true},
		"reset already passed": {response(429, map[string]string{"RateLimit-Reset": strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}), 0, true},
		"reset ignored on 5xx": {response(502, map[string]string{"RateLimit-Reset": reset}), 0, false},
		"reset ignored on 403": {response(403, map[string]string{"X-RateLimit-Reset": reset}), 0, false},
		"nothing said":         {response(502, nil), 0, false},
		"429 saying nothing":   {response(429, nil), 0, false},
		"no response":          {nil, 0, false},
		"garbage retry-after":  {response(429, map[string]string{"Retry-After": "soon"}), 0, false},
		"negative retry-after": {response(429, map[string]string{"Retry-After": "-3"}), 0, false},
		"date already passed":  {response(429, map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}), 0, true},
	} {
		got, ok := ServerWait(tc.resp, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %s, %v; want %s, %v", name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetryAfterReadsOnlyRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)
	if d, ok := RetryAfter(response(429, map[string]string{"RateLimit-Reset": reset}), now); ok || d != 0 {
		t.Errorf("a reset header alone: %s, %v; want 0, false", d, ok)
	}
	if d, ok := RetryAfter(response(502, map[string]string{"Retry-After": "4"}), now); !ok || d != 4*time.Second {
		t.Errorf("Retry-After on a 502: %s, %v; want 4s, true", d, ok)
	}
	if d, ok := RetryAfter(nil, now); ok || d != 0 {
		t.Errorf("no response: %s, %v; want 0, false", d, ok)
	}
}
