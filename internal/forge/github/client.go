// Package github is the forge adapter for GitHub and GitHub Enterprise,
// built on google/go-github. It translates GitHub's payloads into task types
// at the edge: nothing above this package sees a go-github type.
package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// DefaultAPIURL is the REST root of github.com.
const DefaultAPIURL = "https://api.github.com"

// Options configures a Client. Zero values mean defaults.
type Options struct {
	// APIURL is the REST root: https://api.github.com (the default), a
	// GitHub Enterprise URL ending in /api/v3, or a test server's root.
	APIURL string
	// Token authenticates every request; comments are posted as its user.
	Token string
	// App authenticates as a GitHub App installation instead of Token.
	App *App
	// Owner makes discovery cover every repository of this user or
	// organisation.
	Owner string
	// Repositories ("owner/name") are searched in addition to Owner's.
	Repositories []string
	// Query holds extra search qualifiers (e.g. "-label:wontfix
	// author:alice"). When set, discovery uses the search API everywhere.
	Query string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives retry and discovery events; nil discards them.
	Logger *slog.Logger
	// Sleep waits between PostComment attempts; nil means a timer that
	// gives up when ctx ends. Tests inject one that records and returns.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetryWait is the longest wait PostComment accepts before another
	// attempt; a longer Retry-After ends it with the error. 0 means 5m.
	MaxRetryWait time.Duration
	// Now is the clock of the app's installation tokens (their renewal,
	// the wait after GitHub refused the app); nil means time.Now.
	Now func() time.Time
}

// Client talks to one GitHub instance. It is safe for concurrent use.
type Client struct {
	gh    *gh.Client
	owner string
	repos []string
	query string
	log   *slog.Logger
	posts postonce.Options

	app   *appTokens // nil: the client authenticates with a token
	token string

	mu  sync.Mutex
	bot string // login of the token's user, once known
}

var _ forge.Forge = (*Client)(nil)

var (
	repoPattern  = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	ownerPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// New checks opts and builds a Client. It makes no request.
func New(opts Options) (*Client, error) {
	base, err := apiBase(opts.APIURL)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.Token == "" && opts.App == nil:
		return nil, errors.New("github: a token or an app is required")
	case opts.Token != "" && opts.App != nil:
		return nil, errors.New("github: a token and an app are exclusive")
	}
	if opts.Owner == "" && len(opts.Repositories) == 0 {
		return nil, errors.New("github: set an owner or repositories to discover tasks in")
	}
	if opts.Owner != "" && !ownerPattern.MatchString(opts.Owner) {
		return nil, fmt.Errorf("github: owner %q is not a user or organisation name", opts.Owner)
	}
	for _, r := range opts.Repositories {
		if !repoPattern.MatchString(r) {
			return nil, fmt.Errorf("github: repository %q must be owner/name", r)
		}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	// Rate-limit checks are off: go-github would otherwise remember a 429's
	// reset time and refuse later calls without sending them, wedging the
	// client after a retry (ours or the HTTP client's) already got past it.
	// Waiting is done here (PostComment) and in the injected HTTP client.
	cl := &Client{
		owner: opts.Owner, repos: dedupe(opts.Repositories), query: strings.TrimSpace(opts.Query),
		log: opts.Logger, posts: postonce.Options{Sleep: opts.Sleep, MaxWait: opts.MaxRetryWait}, token: opts.Token,
	}
	with := []gh.ClientOptionsFunc{gh.WithURLs(&base, &base), gh.WithUserAgent("coding-agent"), gh.WithDisableRateLimitCheck()}
	if opts.App != nil {
		now, sleep := opts.Now, opts.Sleep
		if now == nil {
			now = time.Now
		}
		if sleep == nil {
			sleep = httpx.Sleep
		}
		if cl.app, err = newAppTokens(*opts.App, base, hc, cl.repos, opts.Owner, now, sleep); err != nil {
			return nil, err
		}
		withApp := *hc
		withApp.Transport = &installationAuth{base: transport(hc), tokens: cl.app}
		with = append(with, gh.WithHTTPClient(&withApp))
	} else {
		with = append(with, gh.WithHTTPClient(hc), gh.WithAuthToken(opts.Token))
	}
	c, err := gh.NewClient(with...)
	if err != nil {
		return nil, fmt.Errorf("github: building client: %w", err)
	}
	cl.gh = c
	if cl.log == nil {
		cl.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cl, nil
}

// apiBase validates the REST root and gives it the trailing slash go-github
// resolves paths against.
func apiBase(raw string) (string, error) {
	if raw == "" {
		raw = DefaultAPIURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("github: api url %q: %w", raw, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("github: api url %q must be an http(s) URL with a host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("github: api url %q must not carry a query, fragment or credentials", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/"
	u.RawPath = ""
	return u.String(), nil
}

func dedupe(repos []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range repos {
		if k := strings.ToLower(r); !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// BotUser returns the login of the token's user, asking GitHub once.
func (c *Client) BotUser(ctx context.Context) (string, error) {
	c.mu.Lock()
	bot := c.bot
	c.mu.Unlock()
	if bot != "" {
		return bot, nil
	}
	if c.app != nil {
		return c.app.botUser(ctx)
	}
	u, _, err := c.gh.Users.Get(ctx, "")
	if err != nil {
		return "", wrapErr("getting the token's user", err)
	}
	if u.GetLogin() == "" {
		return "", errors.New("getting the token's user: github answered without a login")
	}
	c.mu.Lock()
	c.bot = u.GetLogin()
	c.mu.Unlock()
	return u.GetLogin(), nil
}

// Token is what authenticates the client's requests now: the configured
// token, or a live installation token of the app (for git over HTTPS).
func (c *Client) Token(ctx context.Context) (string, error) {
	if c.app != nil {
		return c.app.Token(ctx)
	}
	return c.token, nil
}

// split checks that ref is a GitHub ref and returns its owner and name.
func split(ref task.Ref) (owner, name string, err error) {
	if ref.Forge != task.GitHub {
		return "", "", fmt.Errorf("%s is not a github task", ref)
	}
	if !repoPattern.MatchString(ref.Repo) || ref.Number <= 0 {
		return "", "", fmt.Errorf("%s: want owner/name and a positive number", ref)
	}
	owner, name, _ = strings.Cut(ref.Repo, "/")
	return owner, name, nil
}

// refName renders a ref the way GitHub people write it: acme/app#12.
func refName(ref task.Ref) string { return fmt.Sprintf("%s#%d", ref.Repo, ref.Number) }

// statusOf returns the HTTP status of a go-github error, or 0.
func statusOf(err error) int {
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// wrapErr names the action; a 404 also wraps forge.ErrNotFound, and a 401
// (a token revoked or expired; an App's token was replaced once already)
// forge.ErrAuth, so that the task waits for working credentials.
func wrapErr(action string, err error) error {
	err = apiErr(err)
	switch statusOf(err) {
	case http.StatusNotFound:
		return fmt.Errorf("%s: %w: %w", action, forge.ErrNotFound, err)
	case http.StatusUnauthorized:
		if errors.Is(err, forge.ErrAuth) {
			return fmt.Errorf("%s: %w", action, err)
		}
		return fmt.Errorf("%s: %w (check github.token or github.app): %w", action, forge.ErrAuth, err)
	}
	return fmt.Errorf("%s: %w", action, err)
}
