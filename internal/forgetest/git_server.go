package forgetest

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// GitServer serves bare repositories over smart HTTP on its own test
// server, for tests that need git without a forge. Create repositories with
// InitRepo; inspect and seed them with the GitRepos helpers; count requests
// with GitFetches, GitPushes, Requests and Count; break it with Inject.
type GitServer struct {
	base
	*GitRepos

	// Token is the only credential accepted (see GitRepos). Change it before
	// the first request if the default does not suit.
	Token string

	srv *httptest.Server
}

// NewGitServer starts a git server that is closed when the test ends.
func NewGitServer(t testing.TB) *GitServer {
	t.Helper()
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	s := &GitServer{Token: "git-test-" + fmt.Sprintf("%x", raw[:])}
	s.GitRepos = newGitRepos(t, "Git", func(tok string) bool { return subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) == 1 })
	s.srv = httptest.NewServer(s.wrap(s.GitRepos, gitErrBody))
	s.url = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's root; a repository is at URL()+"/"+name+".git".
func (s *GitServer) URL() string { return s.srv.URL }

// InitRepo creates the bare repository name (such as "acme/app"), its main
// branch holding a README.md, and returns its directory. Creating it again
// does nothing.
func (s *GitServer) InitRepo(name string) string {
	s.t.Helper()
	if err := s.declare(name); err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	return s.GitDir(name)
}

// GitFetches counts the clones, fetches and ls-remotes of the repository
// name that were answered: each begins with a GET of
// <name>.git/info/refs?service=git-upload-pack answered 200 (protocol v2
// then sends one or more POSTs to git-upload-pack, v0 one).
func (b *base) GitFetches(name string) int {
	return b.gitCount(name, http.MethodGet, "/info/refs", "service=git-upload-pack")
}

// GitPushes counts the pushes to the repository name that were answered:
// each begins with a GET of <name>.git/info/refs?service=git-receive-pack
// answered 200, a push with nothing to send ("Everything up-to-date")
// too. Whether the update then went through is for Branches or Head to
// say: a large push first probes with a small POST to git-receive-pack, and
// a refused update is reported inside a 200.
func (b *base) GitPushes(name string) int {
	return b.gitCount(name, http.MethodGet, "/info/refs", "service=git-receive-pack")
}

func (b *base) gitCount(name, method, service, query string) int {
	n := 0
	for _, r := range b.Requests() {
		repo, rest, ok := gitPath(r.Path)
		if ok && r.Method == method && r.Status == http.StatusOK && gitKey(repo) == gitKey(name) &&
			rest == service && strings.Contains(r.Query, query) {
			n++
		}
	}
	return n
}

// gitErrBody is the body of a fault injected on a git request: git prints
// the status, not the body.
func gitErrBody(status int) string { return http.StatusText(status) + "\n" }
