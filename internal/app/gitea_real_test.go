package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// The README's quickstart on a real Gitea (CODING_AGENT_GITEA_URL and
// CODING_AGENT_GITEA_ADMIN_TOKEN; skipped without them): a labelled
// issue is claimed, the model writes a file, and the work is pushed to
// coding-agent/issue-N and proposed as a WIP: pull request that closes
// the issue; a collaborator's reply starts a second round on the same
// branch and pull request; the labels end where they should. The
// emulator's suites stand in for this in CI.
func TestQuickstartOnARealGitea(t *testing.T) {
	g := forgetest.NewRealGitea(t)
	bot, botTok := g.User("agent")
	alice, aliceTok := g.User("alice")
	bob, bobTok := g.User("bob")
	repo := alice + "/app"
	g.Repo(aliceTok, "app")
	g.Collaborator(aliceTok, repo, bot, "admin")
	g.Collaborator(aliceTok, repo, bob, "write")
	n := g.Issue(aliceTok, repo, "Add a greeting file", "Create hello.txt saying hello.", "coding agent", "bug")

	round := 1
	e := newEnv(t, setup{forge: task.Gitea, kind: task.Issue, provider: config.ProviderOpenAI, native: true, conversation: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if round == 1 {
				return writeFiles("hello.txt")(e, r)
			}
			return writeFiles("bye.txt")(e, r)
		}})
	quickstart(t, e)
	e.cfg.Gitea.APIURL, e.cfg.Gitea.Token, e.cfg.Gitea.Repositories = g.URL, config.Secret(botTok), []string{repo}
	e.ref = task.Ref{Forge: task.Gitea, Repo: repo, Kind: task.Issue, Number: n}
	labels := func() []string {
		var is struct {
			Labels []struct {
				Name string `json:"name"`
			} `json:"labels"`
		}
		g.Call("GET", fmt.Sprintf("/repos/%s/issues/%d", repo, n), aliceTok, nil, &is, http.StatusOK)
		var out []string
		for _, l := range is.Labels {
			out = append(out, l.Name)
		}
		slices.Sort(out)
		return out
	}
	e.realLabels = labels
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !slices.Contains(e.claimedAt, "coding agent processing") || slices.Contains(e.claimedAt, "coding agent") {
		t.Errorf("labels at the first model request %v: the claim must come first", e.claimedAt)
	}
	if l := labels(); !slices.Equal(l, []string{"bug", "coding agent awaiting response"}) {
		t.Fatalf("labels after round 1: %q", l)
	}
	branch := "coding-agent/issue-" + strconv.Itoa(n)
	file := func(path string) string {
		var f struct {
			Content string `json:"content"`
		}
		g.Call("GET", "/repos/"+repo+"/contents/"+path+"?ref="+branch, aliceTok, nil, &f, http.StatusOK)
		return f.Content
	}
	if file("hello.txt") == "" {
		t.Fatal("hello.txt is not on the branch")
	}
	pulls := func() []struct {
		Number int    `json:"number"`
		Title  string `json:"title"`
		Body   string `json:"body"`
		Head   struct {
			Ref string `json:"ref"`
		} `json:"head"`
	} {
		var ps []struct {
			Number int    `json:"number"`
			Title  string `json:"title"`
			Body   string `json:"body"`
			Head   struct {
				Ref string `json:"ref"`
			} `json:"head"`
		}
		g.Call("GET", "/repos/"+repo+"/pulls?state=open", aliceTok, nil, &ps, http.StatusOK)
		return ps
	}
	ps := pulls()
	if len(ps) != 1 || ps[0].Head.Ref != branch || !strings.HasPrefix(ps[0].Title, "WIP: ") ||
		!strings.Contains(ps[0].Body, "Closes #"+strconv.Itoa(n)) {
		t.Fatalf("pull requests after round 1: %+v", ps)
	}
	var comments []struct {
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.Call("GET", fmt.Sprintf("/repos/%s/issues/%d/comments", repo, n), aliceTok, nil, &comments, http.StatusOK)
	last := comments[len(comments)-1]
	if last.User.Login != bot || !strings.Contains(last.Body, "/pulls/"+strconv.Itoa(ps[0].Number)) {
		t.Errorf("the last comment does not link the pull request:\n%s", last.Body)
	}

	round = 2
	g.Comment(bobTok, repo, n, "Please also add a goodbye file.")
	if err := e.run(context.Background()); err != nil {
		t.Fatalf("run, round 2: %v", err)
	}
	if file("bye.txt") == "" || file("hello.txt") == "" {
		t.Error("round 2 did not add bye.txt beside hello.txt")
	}
	if ps2 := pulls(); len(ps2) != 1 || ps2[0].Number != ps[0].Number {
		t.Errorf("pull requests after round 2: %+v, want #%d alone", ps2, ps[0].Number)
	}
	if l := labels(); !slices.Equal(l, []string{"bug", "coding agent awaiting response"}) {
		t.Errorf("labels after round 2: %q", l)
	}
}
