// Package gitea is the forge adapter for Gitea and its fork Forgejo
// (Codeberg runs Forgejo), built on Gitea's Go SDK. It finds labelled
// issues and pull requests in configured repositories or an owner's, reads
// them and their comments, posts and edits comments, moves labels one at a
// time and delivers work as a pull request. Gitea payloads are translated
// into task types here and go no further.
//
// The SDK keeps one context per client, set with SetContext: a client
// shared by concurrent calls could not cancel one of them alone. Each call
// builds its own SDK client (api), which sends no request of its own; the
// HTTP client passed in Options is shared, and is the only retry layer,
// except PostComment and OpenChange, which package postonce retries,
// checking before posting again.
package gitea

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

var (
	_ forge.Forge = (*Client)(nil)
	_ forge.Setup = (*Client)(nil)
)

// Options configure a Client: forge.Access, the same for every forge.
// APIURL is the instance's root URL (https://gitea.example.com; the API is
// under /api/v1, and a URL that ends in /api/v1 is taken as well); Token
// is an access token of the user the agent acts as; Repositories and Owner
// are watched. Zero values mean defaults.
type Options = forge.Access

// Client talks to one Gitea (or Forgejo) instance as one user.
type Client struct {
	url   string
	token string
	hc    *http.Client
	repos []string
	owner string
	log   *slog.Logger
	posts postonce.Options

	mu     sync.Mutex
	bot    string
	labels map[string]map[string]int64 // repository → label name → id
	warned map[string]bool             // warnings logged once
}

// New builds a Client. It sends no request.
func New(opts Options) (*Client, error) {
	if opts.Token == "" {
		return nil, errors.New("creating gitea client: token is empty")
	}
	root := strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(opts.APIURL, "/"), "/api/v1"), "/")
	if !strings.HasPrefix(root, "http://") && !strings.HasPrefix(root, "https://") {
		return nil, fmt.Errorf("creating gitea client: api_url %q is not an http(s) URL", opts.APIURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{url: root, token: opts.Token, hc: hc, repos: opts.Repositories, owner: opts.Owner, log: log,
		posts: postonce.Options{Sleep: opts.Sleep}, labels: map[string]map[string]int64{}, warned: map[string]bool{}}, nil
}

// api is an SDK client for one call, bound to ctx. SetGiteaVersion("")
// keeps it from asking the server's version first: the features used
// here are all in Gitea 1.20 and Forgejo 7, and a build's version string
// ("development", Forgejo's "11.0.0+gitea-1.22.0") need not parse.
func (c *Client) api(ctx context.Context) *sdk.Client {
	api, err := sdk.NewClient(c.url, sdk.SetHTTPClient(c.hc), sdk.SetToken(c.token), sdk.SetGiteaVersion(""),
		sdk.SetContext(ctx), sdk.SetUserAgent("coding-agent"))
	if err != nil {
		// NewClient fails only when an option does, and these cannot.
		panic(fmt.Sprintf("gitea: building the SDK client: %v", err))
	}
	return api
}

// BotUser returns the login the token belongs to, asked once.
func (c *Client) BotUser(ctx context.Context) (string, error) {
	c.mu.Lock()
	bot := c.bot
	c.mu.Unlock()
	if bot != "" {
		return bot, nil
	}
	u, resp, err := c.api(ctx).GetMyUserInfo()
	if err != nil {
		return "", fmt.Errorf("getting the gitea user of the token: %w", wrap(resp, err))
	}
	c.mu.Lock()
	c.bot = u.UserName
	c.mu.Unlock()
	return u.UserName, nil
}

// apiError is a failed call: the status Gitea answered (0 when it did not
// answer), its headers, and what it said.
type apiError struct {
	status int
	header http.Header
	err    error
}

func (e *apiError) Error() string {
	switch e.status {
	case 0:
		return e.err.Error()
	case http.StatusUnauthorized:
		return fmt.Sprintf("gitea answered 401 (check gitea.token): %v", e.err)
	}
	return fmt.Sprintf("gitea answered %d: %v", e.status, e.err)
}

func (e *apiError) Unwrap() []error {
	switch e.status {
	case http.StatusNotFound:
		return []error{e.err, forge.ErrNotFound}
	case http.StatusUnauthorized:
		return []error{e.err, forge.ErrAuth}
	}
	return []error{e.err}
}

// wrap turns an SDK error into an apiError that keeps the answer's
// status: a 404 is forge.ErrNotFound, a 401 forge.ErrAuth.
func wrap(resp *sdk.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &apiError{err: err}
	if resp != nil && resp.Response != nil {
		e.status, e.header = resp.StatusCode, resp.Header
	}
	return e
}

// statusOf is the status of a failed call; 0 when Gitea did not answer.
func statusOf(err error) int {
	if e, ok := errors.AsType[*apiError](err); ok {
		return e.status
	}
	return 0
}

// split reads a ref of this forge into its owner and repository name.
func split(ref task.Ref) (owner, name string, err error) {
	if ref.Forge != task.Gitea {
		return "", "", fmt.Errorf("ref %s is not a gitea task", ref)
	}
	if ref.Kind != task.Issue && ref.Kind != task.PullRequest {
		return "", "", fmt.Errorf("ref %s: kind %q is neither issue nor pull request", ref, ref.Kind)
	}
	if ref.Number <= 0 {
		return "", "", fmt.Errorf("ref %s: missing number", ref)
	}
	return splitRepo(ref.Repo)
}

// splitRepo reads "owner/name".
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// name renders a ref without its forge prefix: "acme/app#12".
func name(ref task.Ref) string { return ref.Repo + ref.Mention() }
