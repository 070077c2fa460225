package github_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/github"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// appClient builds a client signed in as the app with key, on repos.
func appClient(t *testing.T, g *forgetest.GitHub, key []byte, installation int64, repos ...string) *github.Client {
	t.Helper()
	k, err := github.ParseAppKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := newClient(t, g, func(o *github.Options) {
		o.Token, o.Repositories = "", repos
		o.App = &github.App{ID: 77, Key: k, InstallationID: installation}
	})
	return c
}

func TestAppActsAsItsBotAndRenewsItsToken(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	key := g.InstallApp(77, "helper-app", "acme")
	g.SetInstallationTokenTTL(2 * time.Second) // its expiry is in whole seconds, as GitHub gives it
	c := appClient(t, g, key, 0, "acme/app")
	ctx := t.Context()
	bot, err := c.BotUser(ctx)
	if err != nil || bot != "helper-app[bot]" {
		t.Fatalf("BotUser = %q, %v; want the app's bot user", bot, err)
	}
	r := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: n}
	if _, err := c.PostComment(ctx, r, "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostComment(ctx, r, "second"); err != nil {
		t.Fatal(err)
	}
	if got := g.InstallationTokens(); got != 1 {
		t.Errorf("%d installation tokens for two requests within its life, want 1", got)
	}
	// Past eleven twelfths of its life, the token is renewed before use:
	// the emulator would refuse it from its expiry on.
	time.Sleep(1950 * time.Millisecond)
	if _, err := c.PostComment(ctx, r, "third"); err != nil {
		t.Fatalf("a request near the token's expiry: %v", err)
	}
	if got := g.InstallationTokens(); got != 2 {
		t.Errorf("%d installation tokens, want a second one near the first's expiry", got)
	}
	for _, cm := range g.Comments("acme/app", n) {
		if cm.Author != "helper-app[bot]" {
			t.Errorf("comment %q by %s, want the app's bot", cm.Body, cm.Author)
		}
	}
	tok, err := c.Token(ctx)
	if err != nil || !strings.HasPrefix(tok, "ghs_") {
		t.Errorf("Token = %q, %v; want the live installation token", tok, err)
	}
}

func TestAppErrorsSayWhatToFix(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	g.AddRepo("other/lib")
	g.AddRepo("stranger/x")
	key := g.InstallApp(77, "helper-app", "acme", "other")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	wrongKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	for _, tc := range []struct {
		name  string
		key   []byte
		inst  int64
		repos []string
		want  string
	}{
		{"another key", wrongKey, 0, []string{"acme/app"}, "401"},
		{"not installed", key, 0, []string{"stranger/x"}, "set github.app.installation_id"},
		{"two installations", key, 0, []string{"acme/app", "other/lib"}, "run one per installation"},
		{"unknown installation", key, 5, []string{"acme/app"}, "installation 5 of app 77"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := appClient(t, g, tc.key, tc.inst, tc.repos...)
			_, err := c.Token(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Token = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := github.ParseAppKey([]byte("not a key")); err == nil {
		t.Error("ParseAppKey accepted garbage")
	}
}

// clockedApp is an app client on acme/app whose tokens and the emulator
// read clock, with the sleeper it waits with.
func clockedApp(t *testing.T, g *forgetest.GitHub, key []byte, clock *forgetest.Clock) (*github.Client, *sleeper) {
	t.Helper()
	k, err := github.ParseAppKey(key)
	if err != nil {
		t.Fatal(err)
	}
	g.SetClock(clock.Now)
	return newClient(t, g, func(o *github.Options) {
		o.Token, o.App, o.Now = "", &github.App{ID: 77, Key: k}, clock.Now
	})
}

// requests are the emulator's requests since from: their method, path and
// status.
func requests(g *forgetest.GitHub, from int) []string {
	var out []string
	for _, r := range g.Requests()[from:] {
		out = append(out, fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Status))
	}
	return out
}

// A token revoked before its expiry is replaced at the first 401: the
// requests refused together (here eight at once) share one new token and
// are each sent again once with it.
func TestAppRevokedTokenIsReplacedOncePerBurst(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	c, _ := clockedApp(t, g, g.InstallApp(77, "helper-app", "acme"), forgetest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)))
	r := ref(task.Issue, "acme/app", n)
	if _, err := c.Get(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	g.RevokeInstallationTokens()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := c.PostComment(t.Context(), r, fmt.Sprintf("comment %d", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a request after the revocation: %v", err)
		}
	}
	if got := g.InstallationTokens(); got != 2 {
		t.Errorf("%d installation tokens, want 2: one new token for the burst", got)
	}
	if got := len(g.Comments("acme/app", n)); got != 8 {
		t.Errorf("%d comments, want 8", got)
	}
}

// When GitHub refuses the app itself (its installation removed), the
// error says so and wraps forge.ErrAuth; then nothing is sent for a minute,
// then one lookup, then nothing for two minutes: the process backs off
// instead of sending every request to be refused. Installed again, the app
// is found again (a new installation) and the requests go through.
func TestAppRefusedBacksOff(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	clock := forgetest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	c, _ := clockedApp(t, g, g.InstallApp(77, "helper-app", "acme"), clock)
	r := ref(task.Issue, "acme/app", n)
	if _, err := c.Get(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	g.Uninstall("acme")
	from := len(g.Requests())
	_, err := c.Get(t.Context(), r)
	if !errors.Is(err, forge.ErrAuth) || errors.Is(err, forge.ErrNotFound) || !strings.Contains(err.Error(), "installation was removed") {
		t.Fatalf("Get = %v, want a refusal (not a missing issue) saying the installation was removed", err)
	}
	want := []string{"GET /repos/acme/app/issues/1 401", "POST /app/installations/1000/access_tokens 404"}
	if got := requests(g, from); !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	quiet := func(when string) {
		t.Helper()
		from := len(g.Requests())
		for range 20 {
			if _, err := c.Get(t.Context(), r); !errors.Is(err, forge.ErrAuth) {
				t.Fatalf("%s: Get = %v, want the refusal in force", when, err)
			}
		}
		if _, err := c.PostComment(t.Context(), r, "x"); !errors.Is(err, forge.ErrAuth) {
			t.Fatalf("%s: PostComment = %v, want the refusal in force", when, err)
		}
		if got := requests(g, from); len(got) != 0 {
			t.Errorf("%s: requests %q, want none", when, got)
		}
	}
	quiet("within the first minute")
	clock.Set(clock.Now().Add(time.Minute))
	from = len(g.Requests())
	if _, err := c.Get(t.Context(), r); !errors.Is(err, forge.ErrAuth) {
		t.Fatalf("after a minute: Get = %v, want a refusal", err)
	}
	if got, want := requests(g, from), []string{"GET /repos/acme/app/installation 404"}; !slices.Equal(got, want) {
		t.Errorf("after a minute: requests %q, want one lookup %q", got, want)
	}
	clock.Set(clock.Now().Add(time.Minute + 59*time.Second))
	quiet("within the next two minutes")
	clock.Set(clock.Now().Add(time.Second))
	id := g.Install("acme")
	if _, err := c.PostComment(t.Context(), r, "back"); err != nil {
		t.Fatalf("installed again (installation %d): %v", id, err)
	}
}

// A request refused with a token just granted in place of a refused one
// is sent again after a short wait (GitHub's replicas may not know the
// token yet), then is an error saying the new token was refused too.
func TestAppNewTokenRefusedToo(t *testing.T) {
	g := forgetest.NewGitHub(t)
	g.AddRepo("acme/app")
	n := g.AddIssue("acme/app", forgetest.IssueSeed{Title: "t", Author: "alice"})
	c, s := clockedApp(t, g, g.InstallApp(77, "helper-app", "acme"), forgetest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)))
	g.Inject(forgetest.Fault{Method: "GET", Path: "/repos/acme/app/issues/", Status: http.StatusUnauthorized,
		Body: `{"message":"Bad credentials","status":"401"}`, Times: -1})
	_, err := c.Get(t.Context(), ref(task.Issue, "acme/app", n))
	if !errors.Is(err, forge.ErrAuth) || !strings.Contains(err.Error(), "new token of installation 1000 of app 77 was refused too (401 Bad credentials)") {
		t.Fatalf("Get = %v, want an error saying the new token was refused too", err)
	}
	if got := g.InstallationTokens(); got != 2 {
		t.Errorf("%d installation tokens, want 2: the first, and one new one", got)
	}
	if got, want := s.got(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v before the new token is given up", got, want)
	}
	if got := g.Count("GET", "/issues/"); got != 4 {
		t.Errorf("%d requests, want 4: the first, with the new token, and twice more after a wait", got)
	}
}
