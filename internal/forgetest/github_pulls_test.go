package forgetest

import (
	"slices"
	"strconv"
	"testing"
)

type ghPullOut struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Draft  bool   `json:"draft"`
	User   struct {
		Login string `json:"login"`
	} `json:"user"`
	Head struct {
		Label string `json:"label"`
		Ref   string `json:"ref"`
		Repo  struct {
			FullName string `json:"full_name"`
			Fork     bool   `json:"fork"`
		} `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

type ghValidationOut struct {
	Message string `json:"message"`
	Errors  []struct {
		Resource, Field, Code, Message string
	} `json:"errors"`
}

func TestGitHubRepository(t *testing.T) {
	g := NewGitHub(t)
	g.AddPull("acme/app", PullSeed{HeadRepo: "forker/app"})
	for _, prefix := range ghPrefixes {
		resp, b := ghCall(t, g, "GET", prefix+"/repos/Acme/App", "")
		v := ghDecode[map[string]any](t, b)
		if resp.StatusCode != 200 || v["full_name"] != "acme/app" || v["default_branch"] != "main" ||
			v["clone_url"] != g.URL()+"/acme/app.git" || v["fork"] != false {
			t.Errorf("GET %s/repos/Acme/App: %d full_name %v default_branch %v clone_url %v fork %v",
				prefix, resp.StatusCode, v["full_name"], v["default_branch"], v["clone_url"], v["fork"])
		}
	}
	_, b := ghCall(t, g, "GET", "/repos/forker/app", "")
	v := ghDecode[map[string]any](t, b)
	if parent, _ := v["parent"].(map[string]any); v["fork"] != true || parent["full_name"] != "acme/app" {
		t.Errorf("the fork: fork %v, parent %v", v["fork"], v["parent"])
	}
	if resp, _ := ghCall(t, g, "GET", "/repos/acme/none", ""); resp.StatusCode != 404 {
		t.Errorf("unknown repository: %d", resp.StatusCode)
	}
}

func TestGitHubCreatePull(t *testing.T) {
	g := NewGitHub(t)
	g.AddIssue("acme/app", IssueSeed{Title: "the issue"})
	g.CommitFile("acme/app", "agent/1", "fix.txt", "fixed\n", "Fix")
	resp, b := ghCall(t, g, "POST", "/repos/acme/app/pulls", `{"title":"Fix it","body":"Closes #1","head":"agent/1","base":"main","draft":true}`)
	pr := ghDecode[ghPullOut](t, b)
	if resp.StatusCode != 201 || pr.Number != 2 || !pr.Draft || pr.Head.Ref != "agent/1" || pr.Head.Label != "acme:agent/1" ||
		pr.Base.Ref != "main" || pr.User.Login != g.BotLogin || pr.Title != "Fix it" || pr.Body != "Closes #1" || pr.State != "open" {
		t.Fatalf("created: %d %+v", resp.StatusCode, pr)
	}
	if loc := resp.Header.Get("Location"); loc != g.URL()+"/repos/acme/app/pulls/2" {
		t.Errorf("Location %q", loc)
	}
	_, b = ghCall(t, g, "GET", "/repos/acme/app/issues/2", "")
	if is := ghDecode[ghIssueOut](t, b); is.PullRequest == nil {
		t.Errorf("the pull request is not an issue with pull_request: %s", b)
	}

	for _, tc := range []struct{ body, field, message string }{
		{`{"title":"again","head":"agent/1","base":"main"}`, "", "A pull request already exists for acme:agent/1."},
		{`{"title":"again","head":"acme:agent/1","base":"main"}`, "", "A pull request already exists for acme:agent/1."},
		{`{"title":"t","head":"main","base":"main"}`, "", "No commits between main and main"},
		{`{"title":"t","head":"agent/1","base":"nothing"}`, "base", ""},
		{`{"title":"t","head":"nothing","base":"main"}`, "head", ""},
		{`{"title":"t","head":"stranger:agent/1","base":"main"}`, "head", ""},
		{`{"title":"t","base":"main"}`, "head", ""},
		{`{"head":"agent/1","base":"main"}`, "title", ""},
	} {
		resp, b := ghCall(t, g, "POST", "/repos/acme/app/pulls", tc.body)
		v := ghDecode[ghValidationOut](t, b)
		if resp.StatusCode != 422 || len(v.Errors) != 1 || v.Errors[0].Field != tc.field || v.Errors[0].Message != tc.message {
			t.Errorf("%s: %d %s", tc.body, resp.StatusCode, b)
		}
	}

	// Once closed, it no longer blocks another from the same branch.
	g.SetState("acme/app", 2, "closed")
	resp, b = ghCall(t, g, "POST", "/repos/acme/app/pulls", `{"title":"Again","head":"agent/1","base":"main"}`)
	if pr := ghDecode[ghPullOut](t, b); resp.StatusCode != 201 || pr.Number != 3 || pr.Draft {
		t.Errorf("after closing: %d %s", resp.StatusCode, b)
	}
}

func TestGitHubCreatePullFromAFork(t *testing.T) {
	g := NewGitHub(t)
	g.AddRepo("acme/app")
	g.AddPull("acme/app", PullSeed{HeadRepo: "forker/app", Head: "seed"})
	g.CommitFile("forker/app", "topic", "x.txt", "x\n", "Topic")
	resp, b := ghCall(t, g, "POST", "/repos/acme/app/pulls", `{"title":"From the fork","head":"forker:topic","base":"main"}`)
	pr := ghDecode[ghPullOut](t, b)
	if resp.StatusCode != 201 || pr.Head.Label != "forker:topic" || pr.Head.Repo.FullName != "forker/app" || !pr.Head.Repo.Fork {
		t.Fatalf("from the fork: %d %s", resp.StatusCode, b)
	}
	// The fork's branch is not in acme/app, only in the fork.
	if slices.Contains(g.Branches("acme/app"), "topic") || !slices.Contains(g.Branches("forker/app"), "topic") {
		t.Errorf("branches: acme/app %q, forker/app %q", g.Branches("acme/app"), g.Branches("forker/app"))
	}
}

func TestGitHubListPulls(t *testing.T) {
	g := NewGitHub(t)
	own := g.AddPull("acme/app", PullSeed{Head: "agent/1"})
	closed := g.AddPull("acme/app", PullSeed{Head: "old"})
	g.SetState("acme/app", closed, "closed")
	fork := g.AddPull("acme/app", PullSeed{Head: "agent/1", HeadRepo: "forker/app"})
	other := g.AddPull("acme/app", PullSeed{Head: "x", Base: "release"})
	g.AddIssue("acme/app", IssueSeed{Title: "not a pull request"})
	for query, want := range map[string][]int{
		"":                              {other, fork, own},
		"?state=all":                    {other, fork, closed, own},
		"?state=closed":                 {closed},
		"?head=acme:agent/1":            {own},
		"?head=ACME:agent/1&state=open": {own},
		"?head=forker:agent/1":          {fork},
		"?head=agent/1":                 {other, fork, own}, // no owner: ignored, as GitHub does
		"?head=acme:old":                {},
		"?head=acme:old&state=all":      {closed},
		"?base=release":                 {other},
		"?sort=created&direction=asc":   {own, fork, other},
	} {
		resp, b := ghCall(t, g, "GET", "/repos/acme/app/pulls"+query, "")
		got := []int{}
		for _, p := range ghDecode[[]ghPullOut](t, b) {
			got = append(got, p.Number)
		}
		if resp.StatusCode != 200 || !slices.Equal(got, want) {
			t.Errorf("pulls%s: %d %v, want %v", query, resp.StatusCode, got, want)
		}
	}
}

func TestGitHubUpdatePull(t *testing.T) {
	g := NewGitHub(t)
	n := g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "old", Body: "old body"}})
	issue := g.AddIssue("acme/app", IssueSeed{Title: "an issue"})
	resp, b := ghCall(t, g, "PATCH", "/repos/acme/app/pulls/"+strconv.Itoa(n), `{"title":"new"}`)
	if pr := ghDecode[ghPullOut](t, b); resp.StatusCode != 200 || pr.Title != "new" || pr.Body != "old body" {
		t.Errorf("title only: %d %+v", resp.StatusCode, pr)
	}
	resp, b = ghCall(t, g, "PATCH", "/repos/acme/app/pulls/"+strconv.Itoa(n), `{"body":"new body","state":"closed"}`)
	if pr := ghDecode[ghPullOut](t, b); resp.StatusCode != 200 || pr.Title != "new" || pr.Body != "new body" || pr.State != "closed" {
		t.Errorf("body and state: %d %+v", resp.StatusCode, pr)
	}
	if resp, _ := ghCall(t, g, "PATCH", "/repos/acme/app/pulls/"+strconv.Itoa(issue), `{"title":"x"}`); resp.StatusCode != 404 {
		t.Errorf("an issue as a pull request: %d", resp.StatusCode)
	}
}
