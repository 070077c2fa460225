package worker

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	ghforge "github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// A discovery pass cut short by a shutdown logs no error: the end of its
// context is not a failure of the forge or the store (serve printed
// "error: ... context canceled" three times as it stopped). The walk ends
// the pass at each of its forge requests in turn, with a task awaiting a
// reply, one asking and one left in processing.
func TestPassCutShortByShutdownLogsNoError(t *testing.T) {
	for k := 1; ; k++ {
		j := awaitingWorld(t)
		j.w.o.ForgeLease = testLease
		j.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Another", Body: "Please.", Author: "alice",
			Labels: []string{testLabels.Bot}})
		j.gh.AddIssue("acme/app", forgetest.IssueSeed{Title: "Left", Body: "Please.", Author: "alice",
			Labels: []string{testLabels.Processing}})
		j.now = j.now.Add(time.Hour)
		ctx, cancel := context.WithCancel(t.Context())
		cut := &cutAt{k: k, cancel: cancel}
		f, err := ghforge.New(ghforge.Options{APIURL: j.gh.URL(), Token: j.gh.Token, Repositories: []string{"acme/app"},
			HTTPClient: &http.Client{Transport: cut},
			Sleep:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
		if err != nil {
			t.Fatal(err)
		}
		j.w.o.Forge = f
		var errs bytes.Buffer
		j.w.o.Logger = slog.New(slog.NewTextHandler(&errs, &slog.HandlerOptions{Level: slog.LevelError}))
		_, err = j.w.Pass(ctx)
		cancel()
		if cut.n < k {
			if k == 1 || err != nil {
				t.Fatalf("a whole pass of %d requests: %v", cut.n, err)
			}
			return
		}
		if errs.Len() != 0 {
			t.Errorf("cut at request %d (%s): logged\n%s", k, cut.at, errs.String())
		}
	}
}

// cutAt cancels the context of the request it is on at its kth request,
// which then fails as a shutdown makes it fail.
type cutAt struct {
	k, n   int
	at     string
	cancel context.CancelFunc
}

func (c *cutAt) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n++
	if c.n == c.k {
		c.at = req.Method + " " + req.URL.Path
		c.cancel()
		return nil, req.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(req)
}
