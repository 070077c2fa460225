package gitea

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// pageSize is asked of every list; Gitea caps it at its
// MAX_RESPONSE_ITEMS (50 by default) and the Link header says whether
// another page follows.
const pageSize = 50

// pages calls list for page 1, 2, … until the answer says there is no
// next page.
func pages(list func(opt sdk.ListOptions) (*sdk.Response, error)) error {
	opt := sdk.ListOptions{Page: 1, PageSize: pageSize}
	for {
		resp, err := list(opt)
		if err != nil {
			return wrap(resp, err)
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			return nil
		}
		opt.Page = resp.NextPage
	}
}

// Discover lists the open issues and pull requests carrying label in the
// configured repositories, and in every repository of the owner (Gitea's
// issue search), each once.
func (c *Client) Discover(ctx context.Context, label string) ([]task.Task, error) {
	var out []task.Task
	seen := map[task.Ref]bool{}
	add := func(repo string, is []*sdk.Issue) {
		for _, i := range is {
			r := repo
			if r == "" && i.Repository != nil {
				r = i.Repository.FullName
			}
			if t := toTask(r, i); t.Ref.Repo != "" && !seen[t.Ref] {
				seen[t.Ref] = true
				out = append(out, t)
			}
		}
	}
	for _, repo := range c.repos {
		owner, name, err := splitRepo(repo)
		if err != nil {
			return nil, fmt.Errorf("discovering tasks: %w", err)
		}
		err = pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
			is, resp, err := c.api(ctx).ListRepoIssues(owner, name, sdk.ListIssueOption{ListOptions: opt,
				State: sdk.StateOpen, Labels: []string{label}})
			add(repo, is)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("listing the issues labelled %q in %s: %w", label, repo, err)
		}
	}
	if c.owner != "" || len(c.repos) == 0 {
		err := pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
			is, resp, err := c.api(ctx).ListIssues(sdk.ListIssueOption{ListOptions: opt, State: sdk.StateOpen,
				Labels: []string{label}, Owner: c.owner})
			add("", is)
			return resp, err
		})
		if err != nil {
			return nil, fmt.Errorf("searching the issues labelled %q%s: %w", label, ownerWords(c.owner), err)
		}
	}
	return out, nil
}

func ownerWords(owner string) string {
	if owner == "" {
		return ""
	}
	return " of " + owner
}

// toTask translates an issue or pull request of repo.
func toTask(repo string, i *sdk.Issue) task.Task {
	t := task.Task{
		Ref:   task.Ref{Forge: task.Gitea, Repo: repo, Kind: task.Issue, Number: int(i.Index)},
		Title: i.Title, Body: i.Body, URL: i.HTMLURL, State: string(i.State),
		CreatedAt: i.Created, UpdatedAt: i.Updated, CommentCount: i.Comments,
	}
	if i.PullRequest != nil {
		t.Ref.Kind = task.PullRequest
	}
	if i.Poster != nil {
		t.Author = i.Poster.UserName
	}
	for _, l := range i.Labels {
		t.Labels = append(t.Labels, l.Name)
	}
	for _, a := range i.Assignees {
		t.Assignees = append(t.Assignees, a.UserName)
	}
	return t
}

// Get reads one issue or pull request; a pull request's branches too,
// and whether its head is in another repository (a fork).
func (c *Client) Get(ctx context.Context, ref task.Ref) (task.Task, error) {
	owner, repo, err := split(ref)
	if err != nil {
		return task.Task{}, err
	}
	i, resp, err := c.api(ctx).GetIssue(owner, repo, int64(ref.Number))
	if err != nil {
		return task.Task{}, fmt.Errorf("getting %s: %w", name(ref), wrap(resp, err))
	}
	t := toTask(ref.Repo, i)
	if t.Ref.Kind != task.PullRequest {
		return t, nil
	}
	pr, resp, err := c.api(ctx).GetPullRequest(owner, repo, int64(ref.Number))
	if err != nil {
		return task.Task{}, fmt.Errorf("getting pull request %s: %w", name(ref), wrap(resp, err))
	}
	if pr.Head != nil {
		t.HeadBranch = pr.Head.Ref
		t.Fork = pr.Base == nil || pr.Head.Repository == nil || pr.Head.RepoID != pr.Base.RepoID
	}
	if pr.Base != nil {
		t.BaseBranch = pr.Base.Ref
	}
	return t, nil
}

// Comments reads every comment of the issue or pull request, oldest first
// (Gitea's comments list holds people's comments, not its timeline's
// events).
func (c *Client) Comments(ctx context.Context, ref task.Ref) ([]task.Comment, error) {
	return c.CommentsSince(ctx, ref, time.Time{})
}

// CommentsSince reads the comments created or updated at or after since
// (Gitea's since parameter), oldest first.
func (c *Client) CommentsSince(ctx context.Context, ref task.Ref, since time.Time) ([]task.Comment, error) {
	owner, repo, err := split(ref)
	if err != nil {
		return nil, err
	}
	var out []task.Comment
	err = pages(func(opt sdk.ListOptions) (*sdk.Response, error) {
		cs, resp, err := c.api(ctx).ListIssueComments(owner, repo, int64(ref.Number), sdk.ListIssueCommentOptions{ListOptions: opt, Since: since})
		for _, cm := range cs {
			out = append(out, toComment(cm))
		}
		return resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the comments of %s: %w", name(ref), err)
	}
	slices.SortStableFunc(out, func(a, b task.Comment) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func toComment(cm *sdk.Comment) task.Comment {
	out := task.Comment{ID: cm.ID, Body: cm.Body, CreatedAt: cm.Created}
	if cm.Poster != nil {
		out.Author = cm.Poster.UserName
	}
	return out
}

// CanWrite reports whether user has write access to the task's
// repository (its collaborator permission is write, admin or owner, by
// a team too). A user Gitea does not know may not write. Gitea shows
// another user's permission only to an administrator of the repository:
// a bot with less may know only that the repository's owner may write,
// and takes anybody else for a reader (warned once per repository), so
// that nobody is heard who may not be.
func (c *Client) CanWrite(ctx context.Context, ref task.Ref, user string) (bool, error) {
	owner, repo, err := splitRepo(ref.Repo)
	if err != nil || user == "" {
		return false, err
	}
	p, resp, err := c.api(ctx).CollaboratorPermission(owner, repo, user)
	if err != nil {
		err = wrap(resp, err)
		switch {
		case errors.Is(err, forge.ErrNotFound):
			return false, nil
		case statusOf(err) == http.StatusForbidden:
			c.warnOnce(ref.Repo, "the bot may not read other users' permissions on the repository: only its owner is "+
				"heard besides a task's author; make the bot an administrator of the repository to hear its writers")
			return strings.EqualFold(owner, user), nil
		}
		return false, fmt.Errorf("reading the permission of %s on %s: %w", user, ref.Repo, err)
	}
	switch strings.ToLower(string(p.Permission)) {
	case "write", "admin", "owner":
		return true, nil
	}
	return false, nil
}

// warnOnce logs msg for repo the first time only.
func (c *Client) warnOnce(repo, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[repo+"\x00"+msg] {
		return
	}
	c.warned[repo+"\x00"+msg] = true
	c.log.Warn(msg, "repository", repo)
}

// LabeledBy returns who most recently added label to the task, from its
// timeline (label events: body "1" for an addition); "" when none did.
// The SDK reads a timeline event's label as a list where Gitea writes one
// object, so the timeline is read here.
func (c *Client) LabeledBy(ctx context.Context, ref task.Ref, label string) (string, error) {
	owner, repo, err := split(ref)
	if err != nil {
		return "", err
	}
	who := ""
	path := fmt.Sprintf("/repos/%s/%s/issues/%d/timeline", url.PathEscape(owner), url.PathEscape(repo), ref.Number)
	for page := 1; page > 0; {
		var evs []timelineEvent
		next, err := c.getJSON(ctx, path, url.Values{"page": {strconv.Itoa(page)}, "limit": {strconv.Itoa(pageSize)}}, &evs)
		if err != nil {
			return "", fmt.Errorf("reading the timeline of %s: %w", name(ref), err)
		}
		for _, e := range evs {
			if e.Type == "label" && e.Label != nil && e.Label.Name == label && e.Body == "1" && e.User != nil {
				who = e.User.Login
			}
		}
		page = next
	}
	return who, nil
}

// timelineEvent is the part of a timeline event LabeledBy reads.
type timelineEvent struct {
	Type  string `json:"type"`
	Body  string `json:"body"`
	Label *struct {
		Name string `json:"name"`
	} `json:"label"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
}

// getJSON reads GET /api/v1{path}?{query} into out, and the number of the
// next page its Link header names (0: none).
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) (next int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/api/v1"+path+"?"+query.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "token "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, &apiError{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, &apiError{err: fmt.Errorf("reading the answer: %w", err)}
	}
	if resp.StatusCode/100 != 2 {
		return 0, &apiError{status: resp.StatusCode, header: resp.Header, err: fmt.Errorf("%s", strings.TrimSpace(string(body)))}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return 0, &apiError{err: fmt.Errorf("reading the answer of GET %s: %w", path, err)}
	}
	return nextPage(resp.Header), nil
}

// nextPage is the page the Link header names next; 0 for none.
func nextPage(h http.Header) int {
	for _, part := range strings.Split(h.Get("Link"), ",") {
		u, rel, _ := strings.Cut(part, ";")
		if strings.TrimSpace(rel) != `rel="next"` {
			continue
		}
		pu, err := url.Parse(strings.Trim(strings.TrimSpace(u), "<>"))
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(pu.Query().Get("page"))
		return n
	}
	return 0
}
