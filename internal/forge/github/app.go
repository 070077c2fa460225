package github

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v92/github"
)

// App is a GitHub App the client authenticates as, through one of its
// installations: requests carry an installation token, asked for with the
// app's JWT and asked for again before it expires; comments are posted as
// the app's bot user ("slug[bot]").
type App struct {
	ID  int64
	Key *rsa.PrivateKey
	// InstallationID is the installation to act through; 0: the one on the
	// configured repositories (all of them must share it) or owner.
	InstallationID int64
}

// ParseAppKey reads an app's private key as GitHub hands it out (PEM,
// PKCS#1 or PKCS#8).
func ParseAppKey(pem []byte) (*rsa.PrivateKey, error) {
	k, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		return nil, fmt.Errorf("github app private key: %w", err)
	}
	return k, nil
}

// appTokens gives the installation token, asking GitHub for a new one when
// the one it has is about to expire.
type appTokens struct {
	app   App
	api   *gh.Client // authenticated with the app's JWT
	repos []string   // where to look the installation up
	owner string
	now   func() time.Time

	mu      sync.Mutex
	id      int64 // the installation, once known
	token   string
	expires time.Time
	issued  time.Time
	slug    string
}

func newAppTokens(app App, base string, hc *http.Client, repos []string, owner string) (*appTokens, error) {
	if app.ID <= 0 {
		return nil, errors.New("github: app id must be positive")
	}
	if app.Key == nil {
		return nil, errors.New("github: app private key is required")
	}
	t := &appTokens{app: app, repos: repos, owner: owner, now: time.Now, id: app.InstallationID}
	jwtClient := &http.Client{Transport: &bearer{base: transport(hc), token: t.jwt}, Timeout: hc.Timeout}
	c, err := gh.NewClient(gh.WithHTTPClient(jwtClient), gh.WithURLs(&base, &base),
		gh.WithUserAgent("coding-agent"), gh.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("github: building the app client: %w", err)
	}
	t.api = c
	return t, nil
}

// jwt is the app's JSON web token: issued a minute in the past (GitHub's
// clock may be behind), valid for ten minutes in all, as GitHub allows.
func (t *appTokens) jwt(context.Context) (string, error) {
	now := t.now()
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(t.app.ID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(t.app.Key)
	if err != nil {
		return "", fmt.Errorf("signing the app's JWT: %w", err)
	}
	return s, nil
}

// Token returns a live installation token, asking for a new one once less
// than a twelfth of the last one's life (five minutes of GitHub's hour) is
// left.
func (t *appTokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.token != "" && now.Before(t.expires.Add(-t.expires.Sub(t.issued)/12)) {
		return t.token, nil
	}
	if t.id == 0 {
		id, err := t.installation(ctx)
		if err != nil {
			return "", err
		}
		t.id = id
	}
	tok, _, err := t.api.Apps.CreateInstallationToken(ctx, t.id, nil)
	if err != nil {
		return "", wrapErr(fmt.Sprintf("getting a token for installation %d of app %d", t.id, t.app.ID), err)
	}
	if tok.GetToken() == "" || tok.ExpiresAt == nil {
		return "", fmt.Errorf("getting a token for installation %d of app %d: github answered without a token or its expiry", t.id, t.app.ID)
	}
	t.token, t.expires, t.issued = tok.GetToken(), tok.GetExpiresAt().Time, now
	return t.token, nil
}

// installation finds the app's installation on the configured repositories
// (all of them must be in one) or, without repositories, on the owner.
func (t *appTokens) installation(ctx context.Context) (int64, error) {
	if len(t.repos) == 0 {
		inst, _, err := t.api.Apps.GetOrganizationInstallation(ctx, t.owner)
		if err != nil {
			var er *gh.ErrorResponse
			if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusNotFound {
				return 0, wrapErr(fmt.Sprintf("finding app %d's installation on %s", t.app.ID, t.owner), err)
			}
			if inst, _, err = t.api.Apps.GetUserInstallation(ctx, t.owner); err != nil {
				return 0, wrapErr(fmt.Sprintf("finding app %d's installation on %s (installed there? set github.app.installation_id)", t.app.ID, t.owner), err)
			}
		}
		return inst.GetID(), nil
	}
	var id int64
	var first string
	for _, r := range t.repos {
		owner, name, _ := strings.Cut(r, "/")
		inst, _, err := t.api.Apps.GetRepositoryInstallation(ctx, owner, name)
		if err != nil {
			return 0, wrapErr(fmt.Sprintf("finding app %d's installation on %s (installed there? set github.app.installation_id)", t.app.ID, r), err)
		}
		switch {
		case id == 0:
			id, first = inst.GetID(), r
		case inst.GetID() != id:
			return 0, fmt.Errorf("github: %s and %s are in different installations of app %d (%d and %d); "+
				"one coding-agent acts through one installation: run one per installation", first, r, t.app.ID, id, inst.GetID())
		}
	}
	return id, nil
}

// botUser is the app's bot user, "slug[bot]" (GET /app with the JWT).
func (t *appTokens) botUser(ctx context.Context) (string, error) {
	t.mu.Lock()
	slug := t.slug
	t.mu.Unlock()
	if slug != "" {
		return slug + "[bot]", nil
	}
	a, _, err := t.api.Apps.Get(ctx, "")
	if err != nil {
		return "", wrapErr(fmt.Sprintf("getting app %d", t.app.ID), err)
	}
	if a.GetSlug() == "" {
		return "", fmt.Errorf("getting app %d: github answered without a slug", t.app.ID)
	}
	t.mu.Lock()
	t.slug = a.GetSlug()
	t.mu.Unlock()
	return a.GetSlug() + "[bot]", nil
}

// bearer sets each request's Authorization from token: "Bearer" for a
// JWT, "token" for an installation token (both as GitHub documents).
type bearer struct {
	base   http.RoundTripper
	token  func(context.Context) (string, error)
	scheme string // "" → "Bearer"
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.token(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	scheme := b.scheme
	if scheme == "" {
		scheme = "Bearer"
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", scheme+" "+tok)
	return b.base.RoundTrip(r)
}

func transport(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}
