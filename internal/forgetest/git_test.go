package forgetest_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forgetest"
)

// gitSide is one way the emulators serve git, as a test sees it.
type gitSide struct {
	repos    *forgetest.GitRepos
	repo     string // the repository's name
	cloneURL string
	user     string // the Basic user name clients of this forge send
	token    string
	fetches  func(name string) int
	pushes   func(name string) int
	requests func() []forgetest.Request
	inject   func(forgetest.Fault)
}

func gitSides(t *testing.T) map[string]func(t *testing.T) gitSide {
	return map[string]func(t *testing.T) gitSide{
		"github": func(t *testing.T) gitSide {
			g := forgetest.NewGitHub(t)
			g.AddRepo("acme/app")
			return gitSide{g.GitRepos, "acme/app", g.URL() + "/acme/app.git", "x-access-token", g.Token, g.GitFetches, g.GitPushes, g.Requests, g.Inject}
		},
		"gitlab": func(t *testing.T) gitSide {
			g := forgetest.NewGitLab(t)
			g.AddProject("grp/sub/app")
			return gitSide{g.GitRepos, "grp/sub/app", strings.TrimSuffix(g.URL(), "/api/v4") + "/grp/sub/app.git", "oauth2", g.Token, g.GitFetches, g.GitPushes, g.Requests, g.Inject}
		},
		"server": func(t *testing.T) gitSide {
			s := forgetest.NewGitServer(t)
			s.InitRepo("acme/app")
			return gitSide{s.GitRepos, "acme/app", s.URL() + "/acme/app.git", "git", s.Token, s.GitFetches, s.GitPushes, s.Requests, s.Inject}
		},
	}
}

// gitEnv is the environment of a git client that knows nothing but what it
// is given: the credential travels only in the environment, as an extra
// header.
func gitEnv(t *testing.T, user, token string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Coding Agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=Coding Agent", "GIT_COMMITTER_EMAIL=agent@example.com",
	}
	if token != "" {
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + token))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic)
	}
	return env
}

func git(t *testing.T, env []string, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustGit(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	out, err := git(t, env, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestGitCloneCommitPush(t *testing.T) {
	for name, side := range gitSides(t) {
		t.Run(name, func(t *testing.T) {
			s := side(t)
			env := gitEnv(t, s.user, s.token)
			work := filepath.Join(t.TempDir(), "work")
			mustGit(t, env, "", "clone", "--quiet", s.cloneURL, work)
			if b, err := os.ReadFile(filepath.Join(work, "README.md")); err != nil || !strings.Contains(string(b), s.repo) {
				t.Fatalf("README.md of the clone: %q, %v", b, err)
			}
			mustGit(t, env, work, "switch", "--quiet", "-c", "agent/issue-7")
			if err := os.WriteFile(filepath.Join(work, "fix.go"), []byte("package fix\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			mustGit(t, env, work, "add", "fix.go")
			mustGit(t, env, work, "commit", "--quiet", "-m", "Fix the thing", "-m", "Closes #7")
			mustGit(t, env, work, "push", "--quiet", "origin", "agent/issue-7")

			if got, want := s.repos.Branches(s.repo), []string{"agent/issue-7", "main"}; !slices.Equal(got, want) {
				t.Errorf("branches %q, want %q", got, want)
			}
			if got, ok := s.repos.FileAt(s.repo, "agent/issue-7", "fix.go"); !ok || got != "package fix\n" {
				t.Errorf("fix.go on the branch: %q, %v", got, ok)
			}
			if _, ok := s.repos.FileAt(s.repo, "main", "fix.go"); ok {
				t.Error("fix.go is on main")
			}
			log := s.repos.Log(s.repo, "agent/issue-7")
			if len(log) != 2 {
				t.Fatalf("log %+v, want the pushed commit on the initial one", log)
			}
			want := forgetest.GitCommit{SHA: log[0].SHA, Subject: "Fix the thing", Body: "Closes #7", AuthorName: "Coding Agent", AuthorEmail: "agent@example.com"}
			if diff := cmp.Diff(want, log[0]); diff != "" {
				t.Errorf("pushed commit (-want +got):\n%s", diff)
			}
			if head, _ := s.repos.Head(s.repo, "agent/issue-7"); head != strings.TrimSpace(mustGit(t, env, work, "rev-parse", "HEAD")) {
				t.Errorf("Head %s is not the pushed commit", head)
			}
			if n := s.pushes(s.repo); n != 1 {
				t.Errorf("%d pushes, want 1", n)
			}
			if n := s.fetches(s.repo); n != 1 {
				t.Errorf("%d fetches, want 1 clone", n)
			}

			// A commit made on the server is fetched.
			s.repos.CommitFile(s.repo, "main", "docs/new.md", "new\n", "Add docs")
			mustGit(t, env, work, "fetch", "--quiet", "origin")
			if got := mustGit(t, env, work, "log", "-1", "--format=%s", "origin/main"); got != "Add docs\n" {
				t.Errorf("fetched main: %q", got)
			}
			if n := s.fetches(strings.ToUpper(s.repo)); n != 2 {
				t.Errorf("%d fetches, want the clone and the fetch", n)
			}
		})
	}
}

func TestGitRefusesAWrongCredential(t *testing.T) {
	for name, side := range gitSides(t) {
		t.Run(name, func(t *testing.T) {
			s := side(t)
			for _, env := range [][]string{gitEnv(t, s.user, "wrong"), gitEnv(t, "", "")} {
				out, err := git(t, env, "", "clone", "--quiet", s.cloneURL, filepath.Join(t.TempDir(), "work"))
				if err == nil {
					t.Fatalf("clone with a wrong credential worked:\n%s", out)
				}
			}
			for _, r := range s.requests() {
				if r.Status != http.StatusUnauthorized {
					t.Errorf("%s %s answered %d, want 401", r.Method, r.Path, r.Status)
				}
			}
			if n := len(s.requests()); n == 0 {
				t.Error("no request reached the server")
			}
			resp := gitGet(t, s.cloneURL+"/info/refs?service=git-upload-pack", "")
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Basic realm="`) {
				t.Errorf("no credential: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
}

func gitGet(t *testing.T, url, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestGitAnswersBearerAndAnyCaseAndNotUnknownRepositories(t *testing.T) {
	for name, side := range gitSides(t) {
		t.Run(name, func(t *testing.T) {
			s := side(t)
			upper := strings.Replace(s.cloneURL, s.repo, strings.ToUpper(s.repo), 1)
			for url, want := range map[string]int{
				s.cloneURL: http.StatusOK,
				upper:      http.StatusOK,
				strings.Replace(s.cloneURL, "/app.git", "/other.git", 1): http.StatusNotFound,
			} {
				resp := gitGet(t, url+"/info/refs?service=git-upload-pack", "Bearer "+s.token)
				if resp.StatusCode != want {
					t.Errorf("%s: %d, want %d", url, resp.StatusCode, want)
				}
				if want == http.StatusOK && resp.Header.Get("Content-Type") != "application/x-git-upload-pack-advertisement" {
					t.Errorf("%s: Content-Type %q", url, resp.Header.Get("Content-Type"))
				}
			}
		})
	}
}

func TestGitPushFailsOnAnInjectedFault(t *testing.T) {
	for name, side := range gitSides(t) {
		t.Run(name, func(t *testing.T) {
			s := side(t)
			env := gitEnv(t, s.user, s.token)
			work := filepath.Join(t.TempDir(), "work")
			mustGit(t, env, "", "clone", "--quiet", s.cloneURL, work)
			mustGit(t, env, work, "commit", "--quiet", "--allow-empty", "-m", "empty")
			s.inject(forgetest.Fault{Method: "POST", Path: "/git-receive-pack", Status: http.StatusBadGateway})
			if out, err := git(t, env, work, "push", "origin", "HEAD:refs/heads/next"); err == nil || !strings.Contains(out, "502") {
				t.Fatalf("push under a 502: %v\n%s", err, out)
			}
			if slices.Contains(s.repos.Branches(s.repo), "next") {
				t.Error("the refused push made its branch")
			}
			mustGit(t, env, work, "push", "--quiet", "origin", "HEAD:refs/heads/next")
			if !slices.Contains(s.repos.Branches(s.repo), "next") {
				t.Error("the second push made no branch")
			}
		})
	}
}

func TestSeededPullsAndMergeRequestsHaveTheirBranches(t *testing.T) {
	gh := forgetest.NewGitHub(t)
	gh.AddPull("acme/app", forgetest.PullSeed{Head: "fix"})
	gh.AddRepo("acme/later")
	gh.CommitFile("acme/later", "main", "a.txt", "a\n", "Add a")
	gh.AddPull("acme/later", forgetest.PullSeed{})
	gl := forgetest.NewGitLab(t)
	gl.AddProject("grp/app")
	gl.AddMR("grp/app", forgetest.MRSeed{SourceBranch: "topic"})
	for _, tc := range []struct {
		repos        *forgetest.GitRepos
		repo, branch string
		want         []string
	}{
		{gh.GitRepos, "acme/app", "fix", []string{"Work on fix", "Initial commit"}},
		{gh.GitRepos, "acme/later", "feature", []string{"Work on feature", "Add a", "Initial commit"}},
		{gl.GitRepos, "grp/app", "topic", []string{"Work on topic", "Initial commit"}},
	} {
		var got []string
		for _, c := range tc.repos.Log(tc.repo, tc.branch) {
			got = append(got, c.Subject)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: log %q, want %q", tc.repo, tc.branch, got, tc.want)
		}
	}
}

// TestLargeCloneAndPush clones what CommitRandom made and pushes a pack
// larger than git's http.postBuffer (1 MiB), which git sends chunked after
// a probe.
func TestLargeCloneAndPush(t *testing.T) {
	s := forgetest.NewGitServer(t)
	s.InitRepo("big/repo")
	s.CommitRandom("big/repo", "main", 3)
	env := gitEnv(t, "git", s.Token)
	work := filepath.Join(t.TempDir(), "work")
	mustGit(t, env, "", "clone", "--quiet", s.URL()+"/big/repo.git", work)
	var size int64
	_ = filepath.Walk(filepath.Join(work, ".git", "objects"), func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			size += info.Size()
		}
		return nil
	})
	if size < 3<<20 {
		t.Errorf("the clone's objects take %d bytes, want at least 3 MiB", size)
	}
	b := make([]byte, 2<<20)
	_, _ = rand.Read(b)
	if err := os.WriteFile(filepath.Join(work, "more.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, env, work, "add", "more.bin")
	mustGit(t, env, work, "commit", "--quiet", "-m", "More data")
	mustGit(t, env, work, "push", "--quiet", "origin", "HEAD:refs/heads/more")
	if got, ok := s.FileAt("big/repo", "more", "more.bin"); !ok || got != string(b) {
		t.Errorf("more.bin on the pushed branch: %d bytes, %v", len(got), ok)
	}
	if n := s.GitPushes("big/repo"); n != 1 {
		t.Errorf("%d pushes, want 1", n)
	}
}
