package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/forge/postonce"
	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// PostComment posts body as a comment on the issue or pull request, once:
// package postonce retries it, looking for it among the bot's recent
// comments before posting again after an ambiguous failure.
func (c *Client) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	owner, repo, err := split(ref)
	if err == nil && strings.TrimSpace(body) == "" {
		err = errors.New("body is empty")
	}
	if err != nil {
		return task.Comment{}, fmt.Errorf("posting a comment on %s: %w", name(ref), err)
	}
	post := func(ctx context.Context) (task.Comment, error) {
		cm, resp, err := c.api(ctx).CreateIssueComment(owner, repo, int64(ref.Number), sdk.CreateIssueCommentOption{Body: body})
		if err != nil {
			return task.Comment{}, wrap(resp, err)
		}
		return toComment(cm), nil
	}
	find := func(ctx context.Context, since time.Time) (task.Comment, bool, error) {
		bot, err := c.BotUser(ctx)
		if err != nil {
			return task.Comment{}, false, err
		}
		cs, err := c.CommentsSince(ctx, ref, since)
		if err != nil {
			return task.Comment{}, false, err
		}
		cm, ok := postonce.Landed(cs, bot, body, since)
		return cm, ok, nil
	}
	cm, err := c.posts.Post(ctx, c.log.With("ref", ref.String()), post, find, classify)
	if err != nil {
		return task.Comment{}, fmt.Errorf("posting a comment on %s: %w", name(ref), err)
	}
	return cm, nil
}

// classify reads a failed post: a 429 was refused before anything
// happened; a 5xx, or no answer we could read, is ambiguous; any other
// answer is final. wait is what Gitea asked for.
func classify(err error, now time.Time) (postonce.Kind, time.Duration) {
	e, ok := errors.AsType[*apiError](err)
	if !ok || e.status == 0 {
		return postonce.Ambiguous, 0
	}
	wait, _ := httpx.ServerWait(&http.Response{StatusCode: e.status, Header: e.header}, now)
	switch {
	case e.status == http.StatusTooManyRequests:
		return postonce.Refused, wait
	case e.status >= 500:
		return postonce.Ambiguous, wait
	}
	return postonce.Final, 0
}

// EditComment replaces the body of comment id. The edit is a PATCH with
// the whole body, which the HTTP client may retry (httpx.Idempotent):
// sending the same body again leaves the same comment. A comment that is
// gone gives forge.ErrNotFound.
func (c *Client) EditComment(ctx context.Context, ref task.Ref, id int64, body string) error {
	owner, repo, err := split(ref)
	switch {
	case err != nil:
	case id <= 0:
		err = errors.New("the comment id must be positive")
	case strings.TrimSpace(body) == "":
		err = errors.New("body is empty")
	default:
		_, resp, e := c.api(httpx.Idempotent(ctx)).EditIssueComment(owner, repo, id, sdk.EditIssueCommentOption{Body: body})
		err = wrap(resp, e)
	}
	if err != nil {
		return fmt.Errorf("editing comment %d on %s: %w", id, name(ref), err)
	}
	return nil
}

// DeleteComment deletes comment id: Gitea answers 204 to the request that
// deleted it and 404 to any later one, which is forge.ErrNotFound.
func (c *Client) DeleteComment(ctx context.Context, ref task.Ref, id int64) error {
	owner, repo, err := split(ref)
	if err == nil && id <= 0 {
		err = errors.New("the comment id must be positive")
	}
	if err == nil {
		resp, e := c.api(ctx).DeleteIssueComment(owner, repo, id)
		err = wrap(resp, e)
	}
	if err != nil {
		return fmt.Errorf("deleting comment %d on %s: %w", id, name(ref), err)
	}
	return nil
}

// React adds the bot's emoji reaction to comment commentID; Gitea
// answers 200 instead of 201 when it is there already.
func (c *Client) React(ctx context.Context, ref task.Ref, commentID int64, emoji string) error {
	owner, repo, err := split(ref)
	if err == nil {
		_, resp, e := c.api(httpx.Idempotent(ctx)).PostIssueCommentReaction(owner, repo, commentID, emoji)
		err = wrap(resp, e)
	}
	if err != nil {
		return fmt.Errorf("reacting %s to comment %d on %s: %w", emoji, commentID, name(ref), err)
	}
	return nil
}

// AddLabel adds label to the issue or pull request by its id, leaving
// the others (POST .../labels adds; only PUT replaces). A label the
// repository lacks is made first, as GitHub and GitLab make one on use
// (doctor --fix makes them with their colours beforehand).
func (c *Client) AddLabel(ctx context.Context, ref task.Ref, label string) error {
	owner, repo, err := split(ref)
	if err == nil {
		var id int64
		if id, err = c.labelID(ctx, ref.Repo, label); errors.Is(err, errNoSuchLabel) {
			id, err = c.makeLabel(ctx, ref.Repo, label)
		}
		if err == nil {
			_, resp, e := c.api(httpx.Idempotent(ctx)).AddIssueLabels(owner, repo, int64(ref.Number), sdk.IssueLabelsOption{Labels: []int64{id}})
			err = wrap(resp, e)
		}
	}
	if err != nil {
		return fmt.Errorf("adding label %q to %s: %w", label, name(ref), err)
	}
	return nil
}

// RemoveLabel removes label from the issue or pull request; Gitea
// answers 204 whether or not it was there.
func (c *Client) RemoveLabel(ctx context.Context, ref task.Ref, label string) error {
	if err := c.removeLabel(ctx, ref, label); err != nil {
		return fmt.Errorf("removing label %q from %s: %w", label, name(ref), err)
	}
	return nil
}

func (c *Client) removeLabel(ctx context.Context, ref task.Ref, label string) error {
	owner, repo, err := split(ref)
	if err != nil {
		return err
	}
	id, err := c.labelID(ctx, ref.Repo, label)
	if errors.Is(err, errNoSuchLabel) {
		return nil
	}
	if err != nil {
		return err
	}
	resp, err := c.api(httpx.Idempotent(ctx)).DeleteIssueLabel(owner, repo, int64(ref.Number), id)
	return wrap(resp, err)
}

// errNoSuchLabel: the repository defines no label of that name (doctor
// --fix creates them).
var errNoSuchLabel = errors.New("the repository has no such label (coding-agent doctor --fix creates it)")

// makeLabel creates repo's label name and returns the id to use: Gitea
// takes two labels of one name, so two hosts making it at once may make
// two; every host reads the labels again and uses the lowest id, and the
// other stays unused.
func (c *Client) makeLabel(ctx context.Context, repo, name string) (int64, error) {
	if err := c.CreateLabel(ctx, repo, name, defaultColor); err != nil {
		return 0, err
	}
	c.log.Info("made a label the repository lacked", "repository", repo, "label", name)
	return c.labelID(ctx, repo, name)
}

// defaultColor is the colour of a label made on use: Gitea's grey.
const defaultColor = "#ededed"

// labelID is the id of repo's label name (the lowest, when Gitea holds
// two of one name): Gitea's label endpoints take ids. The repository's
// labels are read once and again when a name is not among them (a label
// created since).
func (c *Client) labelID(ctx context.Context, repo, name string) (int64, error) {
	c.mu.Lock()
	id, ok := c.labels[repo][name]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	ls, err := c.repoLabels(ctx, repo)
	if err != nil {
		return 0, err
	}
	ids := make(map[string]int64, len(ls))
	for _, l := range ls {
		if id, ok := ids[l.Name]; !ok || l.ID < id {
			ids[l.Name] = l.ID
		}
	}
	c.mu.Lock()
	c.labels[repo] = ids
	c.mu.Unlock()
	if id, ok := ids[name]; ok {
		return id, nil
	}
	return 0, fmt.Errorf("label %q in %s: %w", name, repo, errNoSuchLabel)
}

// repoLabels lists every label repo defines (its own, not its
// organisation's).
func (c *Client) repoLabels(ctx context.Context, repo string) ([]*sdk.Label, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	var out []*sdk.Label
	err = pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
		ls, resp, err := c.api(ctx).ListRepoLabels(owner, name, sdk.ListLabelsOptions{ListOptions: opt})
		out = append(out, ls...)
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the labels of %s: %w", repo, err)
	}
	return out, nil
}

var _ forge.Labeler = (*Client)(nil)
