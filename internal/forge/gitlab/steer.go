package gitlab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"

	"github.com/coding-agent/coding-agent/internal/httpx"
	"github.com/coding-agent/coding-agent/internal/task"
)

// CanWrite reports whether user is a member of the task's project with
// Developer access (30) or more, membership inherited from its groups
// included (GET /projects/:id/members/all, filtered by query and matched
// on the exact username, ignoring case). A user who is no member is false,
// not an error; a project that cannot be found is forge.ErrNotFound.
func (c *Client) CanWrite(ctx context.Context, ref task.Ref, user string) (bool, error) {
	action := fmt.Sprintf("checking whether %s may write to %s", user, ref.Repo)
	if err := checkRef(ref); err != nil {
		return false, fmt.Errorf("%s: %w", action, err)
	}
	return c.canWrite(ctx, ref.Repo, user, action)
}

// canWrite reports whether user is a member of project at Developer or
// higher, inherited membership included.
func (c *Client) canWrite(ctx context.Context, project, user, action string) (bool, error) {
	if strings.TrimSpace(user) == "" {
		return false, fmt.Errorf("%s: empty user", action)
	}
	same := func(m *gl.ProjectMember) bool { return strings.EqualFold(m.Username, user) }
	opt := &gl.ListProjectMembersOptions{ListOptions: gl.ListOptions{PerPage: perPage}, Query: gl.Ptr(user)}
	// The query matches names and usernames in part: read on until the user
	// turns up.
	members, err := collect(func(page int64) ([]*gl.ProjectMember, *gl.Response, error) {
		opt.Page = page
		return c.api.ProjectMembers.ListAllProjectMembers(project, opt, gl.WithContext(ctx))
	}, func(page []*gl.ProjectMember) bool { return slices.ContainsFunc(page, same) })
	if err != nil {
		return false, fmt.Errorf("%s: %w", action, translateErr(err))
	}
	for _, m := range members {
		if same(m) && m.AccessLevel >= gl.DeveloperPermissions {
			return true, nil
		}
	}
	return false, nil
}

// React awards emoji (GitLab's name, such as "eyes" or "thumbsup") to note
// commentID of the issue or merge request, as the token's user. Repeating
// the POST cannot award twice, so it is marked idempotent and the HTTP
// client retries it like a PUT after a 5xx, a 429 or a timeout. GitLab
// answers a second award of the same emoji with a 404; the client library
// drops that answer's body, so after any 404 the note's awards are read:
// when the bot's award is among them, the reaction is there and that is
// success.
func (c *Client) React(ctx context.Context, ref task.Ref, commentID int64, emoji string) error {
	if err := c.award(ctx, ref, commentID, emoji); err != nil {
		return fmt.Errorf("awarding %q to note %d on %s: %w", emoji, commentID, name(ref), err)
	}
	return nil
}

func (c *Client) award(ctx context.Context, ref task.Ref, id int64, emoji string) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if id <= 0 {
		return errors.New("note id must be positive")
	}
	if strings.TrimSpace(emoji) == "" {
		return errors.New("empty emoji name")
	}
	opt := &gl.CreateAwardEmojiOptions{Name: emoji}
	rctx := gl.WithContext(httpx.Idempotent(ctx))
	var err error
	if ref.Kind == task.MergeRequest {
		_, _, err = c.api.AwardEmoji.CreateMergeRequestAwardEmojiOnNote(ref.Repo, int64(ref.Number), id, opt, rctx)
	} else {
		_, _, err = c.api.AwardEmoji.CreateIssuesAwardEmojiOnNote(ref.Repo, int64(ref.Number), id, opt, rctx)
	}
	if !errors.Is(err, gl.ErrNotFound) {
		return err
	}
	awarded, lerr := c.awarded(ctx, ref, id, emoji)
	if lerr != nil && !errors.Is(lerr, gl.ErrNotFound) {
		// The 404 means a missing note or a repeated award; which one is
		// unknown, so it is not reported as not found.
		return fmt.Errorf("gitlab answered 404; reading the note's awards to tell a repeated award from a missing note: %w", lerr)
	}
	if awarded {
		return nil
	}
	return translateErr(err)
}

// awarded reports whether the bot has awarded emoji to note id.
func (c *Client) awarded(ctx context.Context, ref task.Ref, id int64, emoji string) (bool, error) {
	bot, err := c.BotUser(ctx)
	if err != nil {
		return false, err
	}
	mine := func(a *gl.AwardEmoji) bool { return a.Name == emoji && strings.EqualFold(a.User.Username, bot) }
	opt := &gl.ListAwardEmojiOptions{ListOptions: gl.ListOptions{PerPage: perPage}}
	awards, err := collect(func(page int64) ([]*gl.AwardEmoji, *gl.Response, error) {
		opt.Page = page
		if ref.Kind == task.MergeRequest {
			return c.api.AwardEmoji.ListMergeRequestAwardEmojiOnNote(ref.Repo, int64(ref.Number), id, opt, gl.WithContext(ctx))
		}
		return c.api.AwardEmoji.ListIssuesAwardEmojiOnNote(ref.Repo, int64(ref.Number), id, opt, gl.WithContext(ctx))
	}, func(page []*gl.AwardEmoji) bool { return slices.ContainsFunc(page, mine) })
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(awards, mine), nil
}
