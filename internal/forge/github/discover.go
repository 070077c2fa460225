package github

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v92/github"

	"github.com/coding-agent/coding-agent/internal/task"
)

// searchCap is how many results one search query lets a client page
// through, whatever its total_count says.
const searchCap = 1000

// reposPerSearch bounds the repo: qualifiers in one search query.
const reposPerSearch = 10

// Discover lists the open issues and pull requests carrying label in the
// configured scope, oldest first, without duplicates. It reads every page
// and fails as a whole if any part of the scope cannot be read, so a
// returned list is complete.
//
// How it lists, and why:
//   - Listed repositories without Query: GET /repos/{o}/{r}/issues with
//     state=open&labels=... (issues and pull requests together). One request
//     per repository and 100 items per page: exact, fresh (no search index
//     lag), no result cap, and on the 5000/hour core budget.
//   - Owner: the search API (is:open label:"..." user:owner). Listing every
//     repository of an owner costs a request per repository per poll (plus
//     the repository listing), which for a large organisation spends the core
//     budget and takes long; one search usually covers the owner in a request
//     or two. Its limits are handled: 30 requests/minute (a poll makes two,
//     for is:issue and is:pr, which GitHub App user tokens require), and the
//     1000-result window (past it the query is narrowed with created:>=, see
//     search). The index may lag a label change by seconds; the next poll
//     picks the item up.
//   - Query set: extra qualifiers only make sense to the search API, so the
//     listed repositories are searched too (repo: qualifiers, ORed).
func (c *Client) Discover(ctx context.Context, label string) ([]task.Task, error) {
	if strings.TrimSpace(label) == "" {
		return nil, fmt.Errorf("discovering github tasks: empty label")
	}
	found := map[string]task.Task{}
	add := func(is *gh.Issue, repo string) {
		if is.GetState() != "open" {
			return
		}
		t := toTask(is, repo)
		found[strings.ToLower(t.Ref.Repo)+"#"+fmt.Sprint(t.Ref.Number)] = t
	}
	if c.query == "" {
		for _, r := range c.repos {
			if err := c.listRepo(ctx, r, label, add); err != nil {
				return nil, wrapErr("listing issues labelled "+label+" in "+r, err)
			}
		}
	} else {
		for chunk := range slices.Chunk(c.repos, reposPerSearch) {
			scope := "repo:" + strings.Join(chunk, " repo:")
			if err := c.searchBoth(ctx, scope, label, add); err != nil {
				return nil, wrapErr("searching issues labelled "+label+" in "+strings.Join(chunk, ", "), err)
			}
		}
	}
	if c.owner != "" {
		if err := c.searchBoth(ctx, "user:"+c.owner, label, add); err != nil {
			return nil, wrapErr("searching issues labelled "+label+" of "+c.owner, err)
		}
	}
	out := make([]task.Task, 0, len(found))
	for _, t := range found {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b task.Task) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.Ref.Repo, b.Ref.Repo), cmp.Compare(a.Ref.Number, b.Ref.Number))
	})
	c.log.DebugContext(ctx, "discovered github tasks", "label", label, "count", len(out))
	return out, nil
}

// listRepo reads every page of a repository's open items carrying label.
func (c *Client) listRepo(ctx context.Context, repo, label string, add func(*gh.Issue, string)) error {
	owner, name, _ := strings.Cut(repo, "/")
	opts := &gh.IssueListByRepoOptions{State: "open", Labels: []string{label}, Sort: "created", Direction: "asc"}
	opts.ListOptions.PerPage = 100
	for {
		page, resp, err := c.gh.Issues.ListByRepo(ctx, owner, name, opts)
		if err != nil {
			return apiErr(err)
		}
		for _, is := range page {
			add(is, repo)
		}
		switch {
		case resp.NextPage != 0:
			opts.ListOptions.Page = resp.NextPage
		case resp.After != "": // GitHub moves some listings to cursors
			opts.ListOptions.Page, opts.After = 0, resp.After
		default:
			return nil
		}
	}
}

// searchBoth searches issues and pull requests separately: GitHub refuses
// mixed results to GitHub App user tokens.
func (c *Client) searchBoth(ctx context.Context, scope, label string, add func(*gh.Issue, string)) error {
	for _, kind := range []string{"is:issue", "is:pr"} {
		// archived:false: an archived repository's labels cannot be changed.
		q := fmt.Sprintf("is:open %s archived:false label:%q %s", kind, label, scope)
		if c.query != "" {
			q += " " + c.query
		}
		if err := c.search(ctx, q, add); err != nil {
			return err
		}
	}
	return nil
}

// search reads every result of q, oldest first. The search API only lets a
// client page through the first 1000 results; when there are more, the
// query is run again from the creation time of the last item seen
// (created:>=), and the overlap is deduplicated by the caller.
func (c *Client) search(ctx context.Context, q string, add func(*gh.Issue, string)) error {
	from := ""
	for {
		query := q
		if from != "" {
			query += " created:>=" + from
		}
		read, total, last, err := c.searchWindow(ctx, query, add)
		if err != nil {
			return err
		}
		if read >= total || read < searchCap {
			return nil
		}
		next := last.UTC().Format(time.RFC3339)
		if next == from {
			return fmt.Errorf("more than %d results created at %s: cannot page past them", searchCap, next)
		}
		from = next
	}
}

// searchWindow reads the pages of one query; it returns how many items it
// read, the total GitHub reported and the creation time of the last item.
func (c *Client) searchWindow(ctx context.Context, q string, add func(*gh.Issue, string)) (read, total int, last time.Time, err error) {
	opts := &gh.SearchOptions{Sort: "created", Order: "asc"}
	opts.PerPage = 100
	for {
		res, resp, err := c.gh.Search.Issues(ctx, q, opts)
		if err != nil {
			return read, total, last, apiErr(err)
		}
		total = res.GetTotal()
		if res.GetIncompleteResults() {
			c.log.WarnContext(ctx, "github search timed out and returned incomplete results", "query", q)
		}
		for _, is := range res.Issues {
			add(is, "")
			read++
			last = is.GetCreatedAt().Time
		}
		if resp.NextPage == 0 || len(res.Issues) == 0 || read >= searchCap {
			return read, total, last, nil
		}
		opts.Page = resp.NextPage
	}
}
