package forgetest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitRepos is a directory of bare git repositories served over git's smart
// HTTP protocol by the system's git http-backend (through net/http/cgi), with
// pushes enabled. Both emulators embed one: a repository they know (AddRepo,
// AddProject, or one created by seeding an issue or a pull/merge request) is
// served at /<name>.git on the emulator's host. A standalone GitServer
// embeds one too.
//
// Requests need HTTP Basic authentication whose password is the token (any
// user name: git clients send "x-access-token:<token>" to GitHub and
// "oauth2:<token>" to GitLab) or "Authorization: Bearer <token>"; anything
// else is answered 401 with a WWW-Authenticate challenge, so that git with
// GIT_TERMINAL_PROMPT=0 fails at once.
//
// A repository is created on first use (a request or a helper): a bare
// repository whose default branch main holds one commit adding README.md,
// so that seeding issues costs no git process. Names are case-insensitive,
// as on both forges.
//
// The helpers (GitDir, Branches, FileAt, Log, CommitFile, CommitRandom,
// Head) fail the test on a git error; call them from the test's goroutine.
type GitRepos struct {
	t       testing.TB
	dir     string
	realm   string
	accepts func(token string) bool
	backend string
	url     string // the server's root, set once it runs

	mu    sync.Mutex // guards repos and the creation of each repository
	repos map[string]*gitRepo
}

// GitCommit is one commit as Log lists it.
type GitCommit struct {
	SHA         string
	Subject     string
	Body        string // the message after the subject line, trimmed
	AuthorName  string
	AuthorEmail string
}

type gitRepo struct {
	name    string   // as first declared
	dir     string   // the bare repository
	ready   bool     // created on disk
	pending []string // branches to create (from main, one commit) with it
	// pulls are the refs a forge keeps for changes from forks
	// (refs/pull/N/head, refs/merge-requests/N/head): brought up to date
	// from the fork's branch before each request.
	pulls []pullRef
}

// pullRef is a fork's branch as the base repository shows it.
type pullRef struct{ ref, fork, branch string }

// emulatorAuthor is who the emulator's own seed commits are by.
const (
	emulatorAuthor = "Forge Emulator"
	emulatorEmail  = "emulator@forgetest.invalid"
)

// newGitRepos makes an empty set of repositories under a temporary
// directory; accepts judges the token of every request, so an emulator's Token may
// change after it starts.
func newGitRepos(t testing.TB, realm string, accepts func(token string) bool) *GitRepos {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("forgetest: git --exec-path: %v (the emulators serve git with the system's git)", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	return &GitRepos{
		t: t, dir: t.TempDir(), realm: realm, accepts: accepts, backend: backend,
		repos: map[string]*gitRepo{},
	}
}

// gitKey is where a repository lives, lower-cased: names are
// case-insensitive.
func gitKey(name string) string { return strings.ToLower(strings.Trim(name, "/")) }

// declare makes name known, with branches to hold besides main (each made
// from main with one commit when missing). A repository already on disk
// gets the missing branches at once.
func (s *GitRepos) declare(name string, branches ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := gitKey(name)
	r := s.repos[key]
	if r == nil {
		r = &gitRepo{name: name, dir: filepath.Join(s.dir, filepath.FromSlash(key)+".git")}
		s.repos[key] = r
	}
	if !r.ready {
		r.pending = append(r.pending, branches...)
		return nil
	}
	for _, b := range branches {
		if err := s.seedBranch(r, b); err != nil {
			return err
		}
	}
	return nil
}

// declarePull makes ref of the repository name follow the fork's branch,
// as a forge keeps a pull or merge request's head in the base repository.
func (s *GitRepos) declarePull(name, ref, fork, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[gitKey(name)]
	if r == nil {
		r = &gitRepo{name: name, dir: filepath.Join(s.dir, filepath.FromSlash(gitKey(name))+".git")}
		s.repos[gitKey(name)] = r
	}
	r.pulls = append(r.pulls, pullRef{ref: ref, fork: fork, branch: branch})
}

// syncPulls brings r's pull refs up to the forks' branches.
func (s *GitRepos) syncPulls(r *gitRepo) error {
	s.mu.Lock()
	pulls := slices.Clone(r.pulls)
	s.mu.Unlock()
	for _, p := range pulls {
		fork, err := s.ensure(p.fork)
		if err != nil || fork == nil {
			return fmt.Errorf("the fork %s of %s: %v", p.fork, r.name, err)
		}
		if _, err := s.run(r.dir, nil, "fetch", "--quiet", fork.dir, "+refs/heads/"+p.branch+":"+p.ref); err != nil {
			return err
		}
	}
	return nil
}

// ensure returns the repository, creating it on disk first if needed; nil
// when name was never declared.
func (s *GitRepos) ensure(name string) (*gitRepo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[gitKey(name)]
	if r == nil || r.ready {
		return r, nil
	}
	if err := s.create(r); err != nil {
		return nil, fmt.Errorf("creating git repository %s: %w", name, err)
	}
	r.ready = true
	for _, b := range r.pending {
		if err := s.seedBranch(r, b); err != nil {
			return nil, err
		}
	}
	r.pending = nil
	return r, nil
}

func (s *GitRepos) create(r *gitRepo) error {
	if _, err := s.run("", nil, "init", "--quiet", "--bare", "--initial-branch=main", r.dir); err != nil {
		return err
	}
	if _, err := s.run(r.dir, nil, "config", "http.receivepack", "true"); err != nil {
		return err
	}
	_, err := s.commit(r, "main", "Initial commit", emulatorAuthor, emulatorEmail,
		map[string][]byte{"README.md": []byte("# " + r.name + "\n")})
	return err
}

// seedBranch makes branch from main with one commit, unless it exists.
func (s *GitRepos) seedBranch(r *gitRepo, branch string) error {
	if _, ok, err := s.head(r, branch); err != nil || ok {
		return err
	}
	_, err := s.commit(r, branch, "Work on "+branch, emulatorAuthor, emulatorEmail,
		map[string][]byte{"work/" + strings.ReplaceAll(branch, "/", "-") + ".txt": []byte("work on " + branch + "\n")})
	return err
}

// run runs git in dir (the bare repository; "" for none) with stdin, and
// returns its standard output. The user's and the system's git
// configuration are left out.
func (s *GitRepos) run(dir string, stdin []byte, args ...string) ([]byte, error) {
	if dir != "" {
		args = append([]string{"--git-dir=" + dir}, args...)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// head resolves a branch to its commit.
func (s *GitRepos) head(r *gitRepo, branch string) (string, bool, error) {
	out, err := s.run(r.dir, nil, "for-each-ref", "--format=%(objectname)", "refs/heads/"+branch)
	if err != nil {
		return "", false, err
	}
	sha := strings.TrimSpace(string(out))
	return sha, sha != "", nil
}

// commit adds one commit to branch writing files (path → content), through
// git fast-import: one process, whatever the size. A missing branch starts
// from main (or from nothing when main is missing too). It returns the
// commit's id.
func (s *GitRepos) commit(r *gitRepo, branch, message, author, email string, files map[string][]byte) (string, error) {
	parent, ok, err := s.head(r, branch)
	if err == nil && !ok {
		parent, _, err = s.head(r, "main")
	}
	if err != nil {
		return "", err
	}
	var in bytes.Buffer
	when := strconv.FormatInt(time.Now().Unix(), 10) + " +0000"
	fmt.Fprintf(&in, "commit refs/heads/%s\nmark :1\n", branch)
	fmt.Fprintf(&in, "author %s <%s> %s\ncommitter %s <%s> %s\n", author, email, when, author, email, when)
	fmt.Fprintf(&in, "data %d\n%s\n", len(message), message)
	if parent != "" {
		fmt.Fprintf(&in, "from %s\n", parent)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(&in, "M 100644 inline %s\ndata %d\n", p, len(files[p]))
		in.Write(files[p])
		in.WriteString("\n")
	}
	in.WriteString("get-mark :1\ndone\n")
	out, err := s.run(r.dir, in.Bytes(), "fast-import", "--quiet", "--done", "--cat-blob-fd=1")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// compare counts the commits of branch head in repository headName that
// branch base of repository baseName lacks, as a pull or merge request
// from head into base would carry; baseOK and headOK say whether each
// branch exists (ahead is 0 unless both do). A head in another repository
// (a fork) is fetched into baseName first, under refs/forks/.
func (s *GitRepos) compare(baseName, base, headName, head string) (ahead int, baseOK, headOK bool, err error) {
	rb, err := s.ensure(baseName)
	if err != nil || rb == nil {
		return 0, false, false, err
	}
	rh, err := s.ensure(headName)
	if err != nil || rh == nil {
		return 0, false, false, err
	}
	baseSHA, baseOK, err := s.head(rb, base)
	if err != nil {
		return 0, false, false, err
	}
	headSHA, headOK, err := s.head(rh, head)
	if err != nil || !baseOK || !headOK {
		return 0, baseOK, headOK, err
	}
	if rh != rb {
		ref := "refs/forks/" + gitKey(headName) + "/" + head
		if _, err := s.run(rb.dir, nil, "fetch", "--quiet", "--no-tags", rh.dir, "+refs/heads/"+head+":"+ref); err != nil {
			return 0, true, true, err
		}
	}
	out, err := s.run(rb.dir, nil, "rev-list", "--count", baseSHA+".."+headSHA)
	if err != nil {
		return 0, true, true, err
	}
	ahead, err = strconv.Atoi(strings.TrimSpace(string(out)))
	return ahead, true, true, err
}

// must returns the declared repository name, on disk, or fails the test.
func (s *GitRepos) must(name string) *gitRepo {
	s.t.Helper()
	r, err := s.ensure(name)
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	if r == nil {
		s.t.Fatalf("forgetest: no git repository %q (add the repository or project first)", name)
	}
	return r
}

// GitDir returns the path of the bare repository name, creating it first if
// it was declared but not used yet.
func (s *GitRepos) GitDir(name string) string {
	s.t.Helper()
	return s.must(name).dir
}

// RepoURL is the URL git clones name from: the server's root, the name as
// given, ".git".
func (s *GitRepos) RepoURL(name string) string { return s.url + "/" + strings.Trim(name, "/") + ".git" }

// Branches returns the repository's branch names, sorted.
func (s *GitRepos) Branches(name string) []string {
	s.t.Helper()
	out, err := s.run(s.must(name).dir, nil, "for-each-ref", "--format=%(refname:lstrip=2)", "refs/heads/")
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	bs := strings.Fields(string(out))
	slices.Sort(bs)
	return bs
}

// Head returns the commit a branch points at; false when it does not exist.
func (s *GitRepos) Head(name, branch string) (string, bool) {
	s.t.Helper()
	sha, ok, err := s.head(s.must(name), branch)
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	return sha, ok
}

// FileAt returns a file's content on a branch; false when the branch or the
// file does not exist.
func (s *GitRepos) FileAt(name, branch, path string) (string, bool) {
	s.t.Helper()
	r, ok := s.branch(name, branch)
	if !ok {
		return "", false
	}
	out, err := s.run(r.dir, nil, "cat-file", "blob", "refs/heads/"+branch+":"+path)
	if err != nil {
		return "", false
	}
	return string(out), true
}

// branch is the repository name when it has branch.
func (s *GitRepos) branch(name, branch string) (*gitRepo, bool) {
	s.t.Helper()
	r := s.must(name)
	_, ok, err := s.head(r, branch)
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	return r, ok
}

// Files returns the paths of the files on a branch, sorted; nil when the
// branch does not exist.
func (s *GitRepos) Files(name, branch string) []string {
	s.t.Helper()
	r, ok := s.branch(name, branch)
	if !ok {
		return nil
	}
	out, err := s.run(r.dir, nil, "ls-tree", "-r", "--name-only", "refs/heads/"+branch)
	if err != nil {
		s.t.Fatalf("forgetest: listing %s of %s: %v", branch, name, err)
	}
	return strings.Fields(string(out))
}

// Log returns the commits reachable from branch, newest first; nil when the
// branch does not exist.
func (s *GitRepos) Log(name, branch string) []GitCommit {
	s.t.Helper()
	r := s.must(name)
	if _, ok, err := s.head(r, branch); err != nil || !ok {
		if err != nil {
			s.t.Fatalf("forgetest: %v", err)
		}
		return nil
	}
	out, err := s.run(r.dir, nil, "log", "--format=%H%x1f%s%x1f%b%x1f%an%x1f%ae%x1e", "refs/heads/"+branch, "--")
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	var cs []GitCommit
	for rec := range strings.SplitSeq(string(out), "\x1e") {
		f := strings.Split(strings.TrimLeft(rec, "\n"), "\x1f")
		if len(f) != 5 {
			continue
		}
		cs = append(cs, GitCommit{SHA: f[0], Subject: f[1], Body: strings.TrimSpace(f[2]), AuthorName: f[3], AuthorEmail: f[4]})
	}
	return cs
}

// CommitFile commits one file to branch (made from main when missing) as
// the emulator's author, and returns the commit's id.
func (s *GitRepos) CommitFile(name, branch, path, content, message string) string {
	s.t.Helper()
	sha, err := s.commit(s.must(name), branch, message, emulatorAuthor, emulatorEmail, map[string][]byte{path: []byte(content)})
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	return sha
}

// CommitRandom commits mb MiB of random bytes to branch (made from main when
// missing), one MiB a file under random/, which git cannot compress: a large
// repository for measurements. It returns the commit's id.
func (s *GitRepos) CommitRandom(name, branch string, mb int) string {
	s.t.Helper()
	files := make(map[string][]byte, mb)
	for i := range mb {
		b := make([]byte, 1<<20)
		_, _ = rand.Read(b)
		files[fmt.Sprintf("random/%04d.bin", i)] = b
	}
	sha, err := s.commit(s.must(name), branch, fmt.Sprintf("Add %d MiB of random data", mb), emulatorAuthor, emulatorEmail, files)
	if err != nil {
		s.t.Fatalf("forgetest: %v", err)
	}
	return sha
}

// gitServices are what follows "<name>.git" in the paths of git's HTTP
// protocols.
var gitServices = []string{"/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD", "/objects/"}

// gitPath splits a URL path such as /acme/app.git/info/refs into the
// repository name ("acme/app") and what follows; ok is false for a path
// that is not git's.
func gitPath(p string) (name, rest string, ok bool) {
	i := strings.Index(p, ".git/")
	for i >= 0 {
		name, rest = p[:i], p[i+len(".git"):]
		if strings.HasPrefix(name, "/") && len(name) > 1 && slices.ContainsFunc(gitServices, func(s string) bool { return strings.HasPrefix(rest, s) }) {
			return name[1:], rest, true
		}
		j := strings.Index(p[i+1:], ".git/")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", "", false
}

// authorized checks the request's credential against the token.
func (s *GitRepos) authorized(r *http.Request) (user string, ok bool) {
	if u, pw, basic := r.BasicAuth(); basic {
		return u, pw != "" && s.accepts(pw)
	}
	if b, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
		return "token", b != "" && s.accepts(b)
	}
	return "", false
}

// ServeHTTP serves git's smart HTTP protocol (and the dumb one) for the
// repositories declared: clone, fetch and push.
func (s *GitRepos) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, ok := gitPath(r.URL.Path)
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	user, ok := s.authorized(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+s.realm+`"`)
		http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
		return
	}
	repo, err := s.ensure(name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if repo == nil {
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return
	}
	if err := s.syncPulls(repo); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The repository lives under its lower-cased name.
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + gitKey(name) + ".git" + rest
	r2.URL.RawPath = ""
	// CGI has no chunked request bodies (net/http/cgi answers 400), and git
	// sends a pack larger than its http.postBuffer chunked: read it whole
	// and pass it on with its length.
	if slices.Contains(r.TransferEncoding, "chunked") {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r2.Body, r2.ContentLength, r2.TransferEncoding = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
	}
	h := &cgi.Handler{
		Path: s.backend,
		Root: "/",
		Dir:  s.dir,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.dir, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + s.dir,
		},
	}
	h.ServeHTTP(w, r2)
}
