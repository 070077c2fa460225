// Package gitlab is the forge adapter for GitLab (gitlab.com or a
// self-managed instance), built on GitLab's Go client. It finds labelled
// issues and merge requests in configured projects and groups, reads them and
// their notes, posts and edits notes and moves labels one at a time. GitLab
// payloads are translated into task types here and go no further.
//
// The client library's own retries are turned off: the HTTP client passed in
// Options is the only retry layer, except PostComment, which package postonce
// retries, checking before posting again.
package gitlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/task"
)

var _ forge.Forge = (*Client)(nil)

// DefaultAPIURL is gitlab.com's REST API.
const DefaultAPIURL = "https://gitlab.com/api/v4"

// Options configures a Client. Zero values mean defaults.
type Options struct {
	// APIURL is the REST API base, DefaultAPIURL when empty.
	APIURL string
	// Token is a personal, project or group access token.
	Token string
	// Projects are watched projects, by numeric id or full path ("grp/app").
	Projects []string
	// Group is a watched group (full path or id), subgroups included.
	Group string
	// HTTPClient sends the requests; nil means a plain client with a timeout.
	HTTPClient *http.Client
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
	// Sleep waits between PostComment attempts; nil means a timer that
	// honours ctx. Tests inject one to record the waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client talks to one GitLab instance as one user.
type Client struct {
	api      *gl.Client
	projects []string
	group    string
	log      *slog.Logger
	posts    postonce.Options

	mu    sync.Mutex
	bot   string
	paths map[int64]string // project id → path_with_namespace
}

// New builds a Client. It sends no request.
func New(opts Options) (*Client, error) {
	if opts.Token == "" {
		return nil, errors.New("creating gitlab client: token is empty")
	}
	apiURL := opts.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	api, err := gl.NewClient(opts.Token,
		gl.WithURLWarningLogger(log), // first: WithBaseURL may warn
		gl.WithBaseURL(apiURL),
		gl.WithHTTPClient(hc),
		// One retry layer only: the caller's HTTP client (and PostComment's
		// checked retries). The library would otherwise retry up to 5 times.
		gl.WithoutRetries(),
		gl.WithCustomRetryMax(0),
		// No hidden client-side throttling either: waits are explicit.
		gl.WithCustomLimiter(noLimit{}),
	)
	if err != nil {
		return nil, fmt.Errorf("creating gitlab client: %w", err)
	}
	c := &Client{
		api: api, projects: opts.Projects, group: opts.Group, log: log,
		posts: postonce.Options{Sleep: opts.Sleep}, paths: map[int64]string{},
	}
	return c, nil
}

// BotUser returns the username the token belongs to, asked once.
func (c *Client) BotUser(ctx context.Context) (string, error) {
	c.mu.Lock()
	bot := c.bot
	c.mu.Unlock()
	if bot != "" {
		return bot, nil
	}
	u, _, err := c.api.Users.CurrentUser(gl.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("getting gitlab user of the token: %w", translateErr(err))
	}
	c.mu.Lock()
	c.bot = u.Username
	c.mu.Unlock()
	return u.Username, nil
}

type noLimit struct{}

func (noLimit) Wait(ctx context.Context) error { return ctx.Err() }

// translateErr maps a 404 to forge.ErrNotFound and a 401 (a token revoked
// or expired) to forge.ErrAuth, so that the task waits for working
// credentials; it keeps anything else, GitLab's answer made to read whole
// (apiError).
func translateErr(err error) error {
	err = apiErr(err)
	if errors.Is(err, gl.ErrNotFound) {
		return forge.ErrNotFound
	}
	if er, ok := errors.AsType[*gl.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%w (check gitlab.token): %w", forge.ErrAuth, err)
	}
	return err
}

// name renders a ref without its forge prefix: "acme/app!7".
func name(ref task.Ref) string {
	return strings.TrimPrefix(ref.String(), ref.Forge+":")
}

// checkRef refuses refs that are not GitLab issues or merge requests.
func checkRef(ref task.Ref) error {
	if ref.Forge != task.GitLab {
		return fmt.Errorf("ref %s is not a gitlab task", ref)
	}
	if ref.Kind != task.Issue && ref.Kind != task.MergeRequest {
		return fmt.Errorf("ref %s: kind %q is neither issue nor merge request", ref, ref.Kind)
	}
	if ref.Repo == "" || ref.Number <= 0 {
		return fmt.Errorf("ref %s: missing project or iid", ref)
	}
	return nil
}
