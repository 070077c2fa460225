package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// A captured signed delivery replayed under new delivery ids (they are
// not signed) is a duplicate within the hour its body is remembered: one
// pass for two hundred posts. An hour later it is heard again, one pass.
func TestReplayedBodyIsADuplicate(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	n := gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	clock := forgetest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	o := both()
	o.Now = clock.Now
	l := newListener(t, o)
	captured := gh.LabelHook("acme/app", n, "coding agent", "alice", ghSecret)
	counts := map[int]int{}
	for i := range 200 {
		status, _ := l.send("/webhooks/github", withHeader(captured, "X-GitHub-Delivery", fmt.Sprintf("replay-%d", i)))
		counts[status]++
	}
	if counts[http.StatusAccepted] != 1 || counts[http.StatusOK] != 199 {
		t.Fatalf("statuses %v, want one 202 and 199 200 (duplicates)", counts)
	}
	if lb, _ := l.ev.got(); len(lb) != 1 {
		t.Fatalf("labelled %d times, want once", len(lb))
	}
	clock.Set(clock.Now().Add(59 * time.Minute))
	if status, body := l.send("/webhooks/github", withHeader(captured, "X-GitHub-Delivery", "replay-late")); status != http.StatusOK ||
		!strings.Contains(body, "duplicate") {
		t.Errorf("within the hour: status %d (%s), want a duplicate", status, body)
	}
	clock.Set(clock.Now().Add(time.Minute))
	if status, body := l.send("/webhooks/github", withHeader(captured, "X-GitHub-Delivery", "replay-next-hour")); status != http.StatusAccepted {
		t.Errorf("an hour later: status %d (%s), want 202", status, body)
	}

	// GitLab's body is proven by the token in its headers: whoever
	// captured a delivery has both, and new ids make no new delivery.
	gl := forgetest.NewGitLab(t)
	gl.AddProject("acme/app")
	iid := gl.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	g := gl.LabelHook("acme/app", forgetest.KindIssue, iid, "coding agent", "alice", glToken)
	if status, _ := l.send("/webhooks/gitlab", g); status != http.StatusAccepted {
		t.Fatalf("GitLab delivery: %d", status)
	}
	again := withHeader(withHeader(g, "Idempotency-Key", "replayed-key"), "X-Gitlab-Event-UUID", "replayed-uuid")
	if status, body := l.send("/webhooks/gitlab", again); status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Errorf("GitLab replay under new ids: status %d (%s), want a duplicate", status, body)
	}
}

// A body of an event that is read is kept up to 1 MB: past it the
// delivery is 413 as soon as it is known, signed or not, its length said
// or not. The body of an event not read is verified as it streams and
// kept nowhere, so a signed 2 MB push is ignored and a ping with another
// secret refused.
func TestBodiesReadAreCapped(t *testing.T) {
	l := newListener(t, both())
	big := `{"action":"labeled","pad":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, chunked := range []bool{false, true} {
		d := signedGitHub("issues", big)
		req, err := http.NewRequest(http.MethodPost, l.srv.URL+"/webhooks/github", bytes.NewReader(d.Body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = d.Header
		if chunked {
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(d.Body)), -1
		}
		resp, err := l.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a signed issues body over 1 MB (chunked %v): status %d, want 413", chunked, resp.StatusCode)
		}
	}
	push := withHeader(signedGitHub("push", `{"ref":"refs/heads/main","pad":"`+strings.Repeat("y", 2<<20)+`"}`),
		"X-GitHub-Delivery", "push-1")
	if status, body := l.send("/webhooks/github", push); status != http.StatusOK || !strings.Contains(body, `event "push" is not read`) {
		t.Errorf("a signed 2 MB push: status %d (%s), want 200 ignored", status, body)
	}
	ping := withHeader(signedGitHub("ping", `{"zen":"Keep it logically awesome."}`), "X-Hub-Signature-256", "sha256="+hmacHex("another secret", `{"zen":"Keep it logically awesome."}`))
	if status, _ := l.send("/webhooks/github", ping); status != http.StatusUnauthorized {
		t.Errorf("a ping signed with another secret: status %d, want 401", status)
	}
}
