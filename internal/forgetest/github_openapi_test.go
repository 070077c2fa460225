package forgetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// ghSpecEnv overrides where GitHub's OpenAPI description is read from.
const ghSpecEnv = "FORGETEST_GITHUB_OPENAPI"

var (
	ghSpecOnce sync.Once
	ghSpec     *openapi3.T
	ghSpecErr  error
)

// ghSpecPath finds node_modules/@octokit/openapi/generated/api.github.com.json
// beside go.mod (installed by `npm ci`), unless FORGETEST_GITHUB_OPENAPI
// names another copy.
func ghSpecPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(ghSpecEnv); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	return filepath.Join(dir, "node_modules", "@octokit", "openapi", "generated", "api.github.com.json")
}

func ghLoadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	path := ghSpecPath(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("GitHub's OpenAPI description is missing (%v): run `npm ci` in the module root "+
			"(package.json lists @octokit/openapi), or set %s to a copy of generated/api.github.com.json", err, ghSpecEnv)
	}
	ghSpecOnce.Do(func() {
		raw, err := os.ReadFile(path)
		if err != nil {
			ghSpecErr = err
			return
		}
		if raw, err = ghTrimSpec(raw, ghSpecPaths); err != nil {
			ghSpecErr = err
			return
		}
		ghSpec, ghSpecErr = openapi3.NewLoader().LoadFromData(raw)
	})
	if ghSpecErr != nil {
		t.Fatalf("loading %s: %v", path, ghSpecErr)
	}
	return ghSpec
}

// ghSpecPaths are the operations the tests validate against.
var ghSpecPaths = []string{
	"/user", "/repos/{owner}/{repo}/issues", "/repos/{owner}/{repo}/issues/{issue_number}",
	"/repos/{owner}/{repo}/pulls/{pull_number}", "/repos/{owner}/{repo}/issues/{issue_number}/comments",
	"/repos/{owner}/{repo}/issues/{issue_number}/labels", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
	"/repos/{owner}/{repo}/issues/{issue_number}/events",
	"/repos/{owner}/{repo}/issues/comments/{comment_id}", "/search/issues",
	"/repos/{owner}/{repo}/collaborators/{username}/permission",
	"/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
	"/repos/{owner}/{repo}", "/repos/{owner}/{repo}/pulls",
}

// ghTrimSpec keeps only the given paths and the components they reach:
// loading the whole 13 MB description takes kin-openapi tens of seconds
// under the race detector.
func ghTrimSpec(raw []byte, paths []string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	allPaths, _ := doc["paths"].(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	keptPaths := map[string]any{}
	keptComps := map[string]map[string]any{}
	var queue []any
	for _, p := range paths {
		if v, ok := allPaths[p]; ok {
			keptPaths[p] = v
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		switch x := v.(type) {
		case []any:
			queue = append(queue, x...)
		case map[string]any:
			for k, y := range x {
				ref, isRef := y.(string)
				if k != "$ref" || !isRef {
					queue = append(queue, y)
					continue
				}
				var kind, name string
				if _, err := fmt.Sscanf(strings.ReplaceAll(strings.TrimPrefix(ref, "#/components/"), "/", " "), "%s %s", &kind, &name); err != nil {
					return nil, fmt.Errorf("unexpected $ref %q", ref)
				}
				if keptComps[kind] == nil {
					keptComps[kind] = map[string]any{}
				}
				if _, done := keptComps[kind][name]; done {
					continue
				}
				target := comps[kind].(map[string]any)[name]
				keptComps[kind][name] = target
				queue = append(queue, target)
			}
		}
	}
	return json.Marshal(map[string]any{
		"openapi": doc["openapi"], "info": doc["info"], "paths": keptPaths, "components": keptComps,
	})
}

// ghCheckResponse validates a response body against the schema the
// description gives for that operation and status.
func ghCheckResponse(t *testing.T, spec *openapi3.T, method, pathTemplate string, status int, body []byte) {
	t.Helper()
	item := spec.Paths.Value(pathTemplate)
	if item == nil {
		t.Fatalf("the description has no path %s", pathTemplate)
	}
	op := item.GetOperation(method)
	if op == nil {
		t.Fatalf("the description has no %s %s", method, pathTemplate)
	}
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		t.Fatalf("%s %s documents no %d response", method, pathTemplate, status)
	}
	media := ref.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		t.Fatalf("%s %s %d has no JSON schema", method, pathTemplate, status)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, pathTemplate, err)
	}
	if err := media.Schema.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.EnableFormatValidation()); err != nil {
		t.Errorf("%s %s %d does not match GitHub's schema:\n%v", method, pathTemplate, status, err)
	}
}

func TestGitHubResponsesMatchOpenAPI(t *testing.T) {
	spec := ghLoadSpec(t)
	g := NewGitHub(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a", Body: "text", Labels: []string{"coding agent", "bug"}, Assignees: []string{"alice"}})
	g.AddIssue("acme/app", IssueSeed{Title: "empty body, closed", State: "closed"})
	p := g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "p", Labels: []string{"coding agent"}}, Head: "fix", Base: "main"})
	g.AddComment("acme/app", n, "alice", "please")
	mine := "/repos/acme/app/issues/comments/" + strconv.FormatInt(g.AddComment("acme/app", n, g.BotLogin, "- [ ] step"), 10)
	onPull := "/repos/acme/app/issues/comments/" + strconv.FormatInt(g.AddComment("acme/app", p, g.BotLogin, "- [ ] step"), 10)
	g.SetPermission("acme/app", "max", "maintain")
	g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "from a fork"}, Head: "fix", HeadRepo: "forker/app", Draft: true})
	g.CommitFile("acme/app", "agent/1", "a.txt", "a\n", "Add a")
	const create = `{"title":"Work","body":"Closes #1","head":"agent/1","base":"main","draft":true}`
	const pullsTemplate = "/repos/{owner}/{repo}/pulls"
	const pullTemplate = "/repos/{owner}/{repo}/pulls/{pull_number}"
	const editTemplate = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
	const permTemplate = "/repos/{owner}/{repo}/collaborators/{username}/permission"
	const reactTemplate = "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"
	num := strconv.Itoa(n)
	for _, tc := range []struct {
		method, path, body, template string
		status                       int
	}{
		{"GET", "/user", "", "/user", 200},
		{"GET", "/repos/acme/app/issues?state=all", "", "/repos/{owner}/{repo}/issues", 200},
		{"GET", "/repos/acme/app/issues/" + num, "", "/repos/{owner}/{repo}/issues/{issue_number}", 200},
		{"GET", "/repos/acme/app/issues/" + strconv.Itoa(p), "", "/repos/{owner}/{repo}/issues/{issue_number}", 200},
		{"GET", "/repos/acme/app/pulls/" + strconv.Itoa(p), "", "/repos/{owner}/{repo}/pulls/{pull_number}", 200},
		{"GET", "/repos/acme/app/issues/" + num + "/comments", "", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 200},
		{"POST", "/repos/acme/app/issues/" + num + "/comments", `{"body":"hi"}`, "/repos/{owner}/{repo}/issues/{issue_number}/comments", 201},
		{"POST", "/repos/acme/app/issues/" + num + "/labels", `{"labels":["x"]}`, "/repos/{owner}/{repo}/issues/{issue_number}/labels", 200},
		{"GET", "/repos/acme/app/issues/" + num + "/labels", "", "/repos/{owner}/{repo}/issues/{issue_number}/labels", 200},
		{"GET", "/repos/acme/app/issues/" + num + "/events", "", "/repos/{owner}/{repo}/issues/{issue_number}/events", 200},
		{"PATCH", mine, `{"body":"- [x] step"}`, editTemplate, 200},
		{"PATCH", onPull, `{"body":"- [x] step"}`, editTemplate, 200},
		{"PATCH", mine, `{"body":""}`, editTemplate, 422},
		{"DELETE", "/repos/acme/app/issues/" + num + "/labels/x", "", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", 200},
		{"DELETE", "/repos/acme/app/issues/" + num + "/labels/x", "", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", 404},
		{"GET", "/repos/acme/app/issues/99", "", "/repos/{owner}/{repo}/issues/{issue_number}", 404},
		{"GET", "/search/issues?q=is:open+user:acme", "", "/search/issues", 200},
		{"GET", "/search/issues?q=x&page=20&per_page=100", "", "/search/issues", 422},
		{"GET", "/repos/acme/app/collaborators/max/permission", "", permTemplate, 200},
		{"GET", "/repos/acme/app/collaborators/acme/permission", "", permTemplate, 200},
		{"GET", "/repos/acme/app/collaborators/alice/permission", "", permTemplate, 200},
		{"GET", "/repos/acme/app/collaborators/stranger/permission", "", permTemplate, 404},
		{"POST", mine + "/reactions", `{"content":"eyes"}`, reactTemplate, 201},
		{"POST", mine + "/reactions", `{"content":"eyes"}`, reactTemplate, 200},
		{"POST", onPull + "/reactions", `{"content":"+1"}`, reactTemplate, 201},
		{"POST", mine + "/reactions", `{"content":"smile"}`, reactTemplate, 422},
		{"GET", "/repos/acme/app", "", "/repos/{owner}/{repo}", 200},
		{"GET", "/repos/forker/app", "", "/repos/{owner}/{repo}", 200},
		{"GET", "/repos/acme/nothing", "", "/repos/{owner}/{repo}", 404},
		{"POST", "/repos/acme/app/pulls", create, pullsTemplate, 201},
		{"POST", "/repos/acme/app/pulls", create, pullsTemplate, 422},
		{"POST", "/repos/acme/app/pulls", `{"title":"t","head":"main","base":"main"}`, pullsTemplate, 422},
		{"POST", "/repos/acme/app/pulls", `{"title":"t","base":"main"}`, pullsTemplate, 422},
		{"GET", "/repos/acme/app/pulls?state=all", "", pullsTemplate, 200},
		{"GET", "/repos/acme/app/pulls?head=acme:agent/1&state=open", "", pullsTemplate, 200},
		{"GET", "/repos/acme/app/pulls?state=bogus", "", pullsTemplate, 422},
		{"PATCH", "/repos/acme/app/pulls/" + strconv.Itoa(p), `{"title":"new","body":"text"}`, pullTemplate, 200},
		{"PATCH", "/repos/acme/app/pulls/" + strconv.Itoa(p), `{"state":"bogus"}`, pullTemplate, 422},
	} {
		resp, b := ghCall(t, g, tc.method, tc.path, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, b)
			continue
		}
		ghCheckResponse(t, spec, tc.method, tc.template, tc.status, b)
	}
}

// TestGitHubOpenAPICheckFails makes sure the validation above can fail.
func TestGitHubOpenAPICheckFails(t *testing.T) {
	spec := ghLoadSpec(t)
	op := spec.Paths.Value("/repos/{owner}/{repo}/issues/{issue_number}").GetOperation(http.MethodGet)
	schema := op.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	if err := schema.VisitJSON(map[string]any{"number": "not a number"}); err == nil {
		t.Fatal("an issue without required fields passed validation")
	}
}
