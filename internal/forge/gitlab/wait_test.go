package gitlab

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

func TestSleepCtxWaitsOrStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleepCtx(t.Context(), time.Hour); err != nil || time.Since(start) != time.Hour {
			t.Errorf("slept %s, err %v; want 1h, nil", time.Since(start), err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Minute, cancel)
		start = time.Now()
		if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) != time.Minute {
			t.Errorf("slept %s, err %v; want 1m, context.Canceled", time.Since(start), err)
		}
	})
}

func TestServerWait(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	reset := strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)
	resp := func(status int, h map[string]string) *gl.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}}
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return &gl.Response{Response: r}
	}
	for name, tc := range map[string]struct {
		resp *gl.Response
		want time.Duration
		ok   bool
	}{
		"seconds":              {resp(429, map[string]string{"Retry-After": "7"}), 7 * time.Second, true},
		"date":                 {resp(503, map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}), 90 * time.Second, true},
		"rate limit reset":     {resp(429, map[string]string{"RateLimit-Reset": reset}), 30 * time.Second, true},
		"reset ignored on 5xx": {resp(502, map[string]string{"RateLimit-Reset": reset}), 0, false},
		"nothing said":         {resp(502, nil), 0, false},
		"no response":          {nil, 0, false},
		"garbage retry-after":  {resp(429, map[string]string{"Retry-After": "soon"}), 0, false},
		"date already passed":  {resp(429, map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}), 0, true},
	} {
		got, ok := serverWait(tc.resp, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %s, %v; want %s, %v", name, got, ok, tc.want, tc.ok)
		}
	}
}
