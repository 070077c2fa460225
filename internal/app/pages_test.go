package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

const uiToken = "ui-token-for-the-pages-0123456789"

// A task's page, from a real run served by `serve`'s listener: the list and
// the timeline show the requests and the calls, the step's comment
// redacted (the model wrote the forge token in it), an outsider's comment
// counted and never shown; without the token every page is 401; the
// closing comment links the page under server.public_url. Headless
// Chromium loads both pages (a screenshot of each is kept: set
// CODING_AGENT_UI_SCREENSHOTS to a folder to keep them there).
func TestTaskPagesOfARealRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	const outsider = "MALLORY-WROTE-THIS-0451"
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if toolResults(r) == 0 {
				e.addComment("mallory", outsider)
				return e.call(r, "Writing hello.txt with the token "+e.token()+".", "fs/write_file",
					map[string]any{"path": filepath.Join(e.workspace, "hello.txt"), "content": "hello from coding-agent\n"})
			}
			return done("Created hello.txt with a greeting.")
		}})
	e.cfg.Server.UIToken, e.cfg.Server.PublicURL = uiToken, "https://agent.example.com"
	s := e.serveHTTP(t)
	waitFor(t, "the task done", func() bool { return slicesContains(e.labels(), "coding agent done") })
	const path = "/tasks/github/acme/app/1"

	for _, p := range []string{"/tasks", path, path + "?token=wrong-token-0123456789abc"} {
		if code, body := s.get(p); code != http.StatusUnauthorized || strings.TrimSpace(body) != "401 Unauthorized" {
			t.Errorf("%s without the token: %d %q", p, code, body)
		}
	}
	list := s.authorized(t, "/tasks")
	page := s.authorized(t, path)
	if !strings.Contains(list, `href="`+path+`"`) || !strings.Contains(list, "done") {
		t.Errorf("the list:\n%s", list)
	}
	for _, want := range []string{"request 1", "request 2", "fs/write_file", "hello.txt", "1 comment(s) ignored", "done: the task is done"} {
		if !strings.Contains(page, want) {
			t.Errorf("the task's page lacks %q", want)
		}
	}
	for _, secret := range []string{e.token(), outsider} {
		if strings.Contains(page, secret) || strings.Contains(list, secret) {
			t.Errorf("a page shows %q", secret)
		}
	}
	closing := e.botComments()
	if len(closing) == 0 || !strings.Contains(closing[len(closing)-1], "https://agent.example.com"+path) {
		t.Errorf("the closing comment does not link the page: %q", closing)
	}
	browse(t, s.base, "list", "/tasks", "github:acme/app#1")
	browse(t, s.base, "task", path, "fs/write_file", e.token(), outsider)
}

func slicesContains(ls []string, l string) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

func (s *served) authorized(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+uiToken)
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// browse loads path in headless Chromium (the token given once in the
// query, as a person's first visit does: the page sets its cookie and
// sends the browser on), checks that the page's text holds want and none
// of never, and keeps a screenshot.
func browse(t *testing.T, base, name, path, want string, never ...string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (.ci/run installs Debian's chromium package)")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	dir := os.Getenv("CODING_AGENT_UI_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "task-pages-"+name+".png")
	url := base + path + "?token=" + uiToken
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=412,1600"}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dom, err := exec.CommandContext(ctx, bin, append(flags, "--dump-dom", url)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", path, err)
	}
	text := string(dom)
	if !strings.Contains(text, want) {
		t.Errorf("chromium's %s page lacks %q:\n%.2000s", name, want, text)
	}
	for _, n := range never {
		if strings.Contains(text, n) {
			t.Errorf("chromium's %s page shows %q", name, n)
		}
	}
	if out, err := exec.CommandContext(ctx, bin, append(flags, "--screenshot="+shot, url)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", path, err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 1000 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of the %s page: %s", name, shot)
}
