package github

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge"
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
// the one it has is about to expire, or was refused before its expiry
// (revoked). When GitHub refuses the app itself (its key, its
// installation), it stops asking for a while: see refuseLocked.
type appTokens struct {
	app   App
	api   *gh.Client // authenticated with the app's JWT
	repos []string   // where to look the installation up
	owner string
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	id      int64 // the installation, once known
	token   string
	expires time.Time
	issued  time.Time
	slug    string
	// refused is why GitHub last refused the app (wrapping forge.ErrAuth);
	// until retryAt every request fails with it at once, without being
	// sent. backoff is the wait after the last refusal, doubled at each
	// one and reset once a request with a token is answered.
	refused error
	retryAt time.Time
	backoff time.Duration
}

// The waits after GitHub refused the app: the first, then doubled at each
// refusal up to the most. A process whose app was uninstalled so sends one
// request a minute at first and one every half hour at last, instead of
// one for every poll, check and comment of every task.
const (
	refusedFirst = time.Minute
	refusedMost  = 30 * time.Minute
)

// youngToken is how long after it was granted GitHub may refuse an
// installation token only because its replicas have not all seen it yet;
// lagWaits are the waits before sending a request refused with so young a
// token again with the same token.
const youngToken = 5 * time.Second

var lagWaits = []time.Duration{time.Second, 2 * time.Second}

func newAppTokens(app App, base string, hc *http.Client, repos []string, owner string,
	now func() time.Time, sleep func(context.Context, time.Duration) error) (*appTokens, error) {
	if app.ID <= 0 {
		return nil, errors.New("github: app id must be positive")
	}
	if app.Key == nil {
		return nil, errors.New("github: app private key is required")
	}
	t := &appTokens{app: app, repos: repos, owner: owner, now: now, sleep: sleep, id: app.InstallationID}
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
	if err := t.refusedLocked(); err != nil {
		return "", err
	}
	if t.token != "" && t.now().Before(t.expires.Add(-t.expires.Sub(t.issued)/12)) {
		return t.token, nil
	}
	return t.renewLocked(ctx)
}

// renew replaces stale, a token GitHub refused before its expiry (it was
// revoked). Requests refused together share one new token: the first to
// come asks for it, those that come after it with the same stale token
// get it.
func (t *appTokens) renew(ctx context.Context, stale string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refusedLocked(); err != nil {
		return "", err
	}
	if t.token != "" && t.token != stale {
		return t.token, nil
	}
	return t.renewLocked(ctx)
}

// young reports whether tok is the token in use and was granted so
// recently that GitHub may refuse it for replication lag alone.
func (t *appTokens) young(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tok == t.token && t.now().Sub(t.issued) < youngToken
}

// worked notes that a request with tok was answered (not refused): the
// wait after a later refusal starts again from the first.
func (t *appTokens) worked(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tok == t.token {
		t.backoff = 0
	}
}

// refuse records that GitHub refused tok, a token it had just granted (a
// new token refused too): the installation is gone or suspended. Requests
// refused together with it record it once.
func (t *appTokens) refuse(tok, why string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := fmt.Errorf("github: %w: a new token of installation %d of app %d was refused too (401 %s): "+
		"the app's installation was removed or suspended, or it lost access to the repositories; "+
		"install the app again (or fix github.app)", forge.ErrAuth, t.id, t.app.ID, why)
	if tok != t.token {
		return err
	}
	return t.refuseLocked(err)
}

// refusedLocked is the refusal in force: until its wait is over no token
// is asked for and no request is sent.
func (t *appTokens) refusedLocked() error {
	if t.refused == nil || !t.now().Before(t.retryAt) {
		return nil
	}
	return fmt.Errorf("%w (GitHub is not asked again before %s)", t.refused, t.retryAt.UTC().Format("15:04:05 MST"))
}

// refuseLocked makes err, a refusal of the app, the one in force: the
// token is dropped and nothing is sent to GitHub for the next wait, so
// that a process whose app was uninstalled or whose key was replaced
// backs off instead of sending every request to be refused.
func (t *appTokens) refuseLocked(err error) error {
	t.backoff = min(max(2*t.backoff, refusedFirst), refusedMost)
	t.refused, t.retryAt, t.token = err, t.now().Add(t.backoff), ""
	return err
}

// renewLocked asks GitHub for a new installation token, finding the
// installation first when it is not known. A refusal of the app (its JWT,
// its installation) is an error wrapping forge.ErrAuth, and is in force
// for the next wait.
func (t *appTokens) renewLocked(ctx context.Context) (string, error) {
	now := t.now()
	if t.id == 0 {
		id, err := t.installation(ctx)
		if err != nil {
			if refused := t.appRefused("", err); refused != nil {
				return "", t.refuseLocked(refused)
			}
			return "", err
		}
		t.id = id
	}
	tok, _, err := t.api.Apps.CreateInstallationToken(ctx, t.id, nil)
	if err != nil {
		what := fmt.Sprintf("getting a token for installation %d of app %d", t.id, t.app.ID)
		if refused := t.appRefused(what, err); refused != nil {
			if statusOf(err) == http.StatusNotFound && t.app.InstallationID == 0 {
				// Installed again, it is another installation: it is
				// looked up again after the wait.
				t.id = 0
			}
			return "", t.refuseLocked(refused)
		}
		return "", wrapErr(what, err)
	}
	if tok.GetToken() == "" || tok.ExpiresAt == nil {
		return "", fmt.Errorf("getting a token for installation %d of app %d: github answered without a token or its expiry", t.id, t.app.ID)
	}
	t.token, t.expires, t.issued, t.refused = tok.GetToken(), tok.GetExpiresAt().Time, now, nil
	return t.token, nil
}

// appRefused is err, GitHub's answer to the app (what it asked, "" when
// err says it), as a refusal wrapping forge.ErrAuth that says what to fix;
// nil when err is no refusal (a server error, the network).
func (t *appTokens) appRefused(what string, err error) error {
	var why string
	switch statusOf(err) {
	case http.StatusUnauthorized:
		why = fmt.Sprintf("GitHub refused the app's JWT: github.app.private_key_file is not the key of app %d "+
			"(or the key was deleted from the app), or github.app.app_id is wrong", t.app.ID)
	case http.StatusForbidden:
		why = "the app's installation is suspended, or the app may not act there"
	case http.StatusNotFound:
		why = "the app's installation was removed (uninstalled from the account), or the app is not installed there, " +
			"or github.app.installation_id is wrong: install the app"
	default:
		return nil
	}
	// GitHub's answer is kept as text only: its status is the token
	// request's, and a caller reading it from the error of its own
	// request would take a removed installation for a deleted issue.
	if what == "" {
		return fmt.Errorf("github: %w: %s: %v", forge.ErrAuth, why, err)
	}
	return fmt.Errorf("github: %s: %w: %s: %v", what, forge.ErrAuth, why, err)
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
	slug, refused := t.slug, t.refusedLocked()
	t.mu.Unlock()
	if slug != "" {
		return slug + "[bot]", nil
	}
	if refused != nil {
		// Its JWT may be what GitHub refuses: asked after the wait.
		return "", refused
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

// installationAuth sends each request with the app's installation token.
// A request refused (401) is sent again with a new token, once (revoked
// tokens are so replaced, one new token for all the requests refused
// together); refused with the new token too, it is sent again after a
// short wait while GitHub may not have seen the token everywhere yet, and
// then is an error wrapping forge.ErrAuth that says what is wrong with the
// app.
type installationAuth struct {
	base   http.RoundTripper
	tokens *appTokens
}

func (a *installationAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	tok, err := a.tokens.Token(ctx)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	resp, err := a.send(r, tok, false)
	renewed, lag := false, 0
	// A request whose body cannot be read again keeps its 401.
	for err == nil && resp.StatusCode == http.StatusUnauthorized && (r.Body == nil || r.Body == http.NoBody || r.GetBody != nil) {
		why := refusal(resp)
		switch {
		case !renewed:
			renewed = true
			if tok, err = a.tokens.renew(ctx, tok); err != nil {
				return nil, err
			}
		case lag < len(lagWaits) && a.tokens.young(tok):
			if err := a.tokens.sleep(ctx, lagWaits[lag]); err != nil {
				return nil, err
			}
			lag++
		default:
			return nil, a.tokens.refuse(tok, why)
		}
		resp, err = a.send(r, tok, true)
	}
	if err == nil && resp.StatusCode != http.StatusUnauthorized {
		a.tokens.worked(tok)
	}
	return resp, err
}

// send sends r with tok; again: its body is read anew.
func (a *installationAuth) send(r *http.Request, tok string, again bool) (*http.Response, error) {
	c := r.Clone(r.Context())
	if again && r.GetBody != nil {
		body, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		c.Body = body
	}
	c.Header.Set("Authorization", "token "+tok)
	return a.base.RoundTrip(c)
}

// refusal reads and closes a 401's body and returns GitHub's message in
// it ("Bad credentials").
func refusal(resp *http.Response) string {
	defer resp.Body.Close()
	var e struct {
		Message string `json:"message"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if json.Unmarshal(b, &e) != nil || e.Message == "" {
		return http.StatusText(resp.StatusCode)
	}
	return e.Message
}

// bearer sets each request's Authorization to the app's JWT, as GitHub
// documents: "Bearer" and the token.
type bearer struct {
	base  http.RoundTripper
	token func(context.Context) (string, error)
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.token(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(r)
}

func transport(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}
