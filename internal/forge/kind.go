package forge

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// Kind is what a forge's adapter says of itself to the one registry that
// builds adapters (app): how to open it, and what differs between forges
// beyond the Forge and Setup it builds.
type Kind struct {
	// Open builds the adapter for a forge reached with an access token.
	// nil: the registry opens it itself (GitHub, which may sign in as an
	// App).
	Open func(Access) (Adapter, error)
	// Name is the forge's task_source and its tasks' Ref.Forge.
	Name string
	// GitUser is the user git names with the token as its password.
	GitUser string
	// BotAdvice is how to act as an account nobody else writes as, for
	// doctor: "a dedicated account or …".
	BotAdvice string
	// Hooks reads the forge's webhook deliveries.
	Hooks Hooks
}

// Adapter is a forge's adapter: the forge the daemon works on, and what
// doctor checks and sets up there.
type Adapter interface {
	Forge
	Setup
}

// Access is what a forge's adapter is opened with: where the forge is,
// who acts there, and what it watches, as configured.
type Access struct {
	APIURL string
	Token  string
	// Repositories are the watched repositories (or projects); Owner is
	// the owner (or group) whose repositories are all watched.
	Repositories []string
	Owner        string
	// HTTPClient sends the requests; Logger receives the adapter's
	// records; Sleep waits between the retries of a post.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Sleep      func(ctx context.Context, d time.Duration) error
}
