package github_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

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
