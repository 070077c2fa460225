package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// CanWrite reports whether user may write to the task's repository: GitHub's
// collaborator permission is admin or write (maintain shows as write, and
// its role_name is checked too). A 404, GitHub's answer for a login that is
// no user (and for a repository the token cannot see), is false, not an
// error; so are read and none, what anyone gets on a public repository.
// GitHub answers 403 when the token itself lacks push access; that is an
// error.
func (c *Client) CanWrite(ctx context.Context, ref task.Ref, user string) (bool, error) {
	owner, name, err := split(ref)
	if err != nil {
		return false, err
	}
	action := fmt.Sprintf("checking whether %s may write to %s", user, ref.Repo)
	if strings.TrimSpace(user) == "" {
		return false, fmt.Errorf("%s: empty user", action)
	}
	// go-github puts the login into the path as it is: escape it, so that a
	// bot's "name[bot]" or a stray "/" cannot change the URL.
	lvl, _, err := c.gh.Repositories.GetPermissionLevel(ctx, owner, name, url.PathEscape(user))
	if statusOf(err) == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, wrapErr(action, err)
	}
	return writes(lvl.GetPermission(), lvl.GetRoleName()), nil
}

// writes reads GitHub's legacy base permission and role name.
func writes(permission, role string) bool {
	switch permission {
	case "admin", "write":
		return true
	}
	switch role {
	case "admin", "maintain", "write":
		return true
	}
	return false
}

// React adds the token user's reaction emoji ("eyes", "+1", ...: GitHub's
// reaction names) to comment commentID of the task's repository. GitHub
// answers 200 for a reaction that is already there and 201 for a new one;
// both are success. Repeating the POST leaves one reaction, so it is
// marked idempotent and the HTTP client retries it like a PUT after a 5xx,
// a 429 or a timeout.
func (c *Client) React(ctx context.Context, ref task.Ref, commentID int64, emoji string) error {
	owner, name, err := split(ref)
	if err != nil {
		return err
	}
	action := fmt.Sprintf("reacting %q to comment %d on %s", emoji, commentID, refName(ref))
	if commentID <= 0 {
		return fmt.Errorf("%s: comment id must be positive", action)
	}
	if strings.TrimSpace(emoji) == "" {
		return fmt.Errorf("%s: empty reaction", action)
	}
	if _, _, err := c.gh.Reactions.CreateIssueCommentReaction(httpx.Idempotent(ctx), owner, name, commentID, emoji); err != nil {
		return wrapErr(action, err)
	}
	return nil
}
