package forgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
)

// gtSpecEnv overrides where Gitea's swagger description is read from.
const gtSpecEnv = "FORGETEST_GITEA_SWAGGER"

// gtModule is the Gitea release whose description the emulator answers
// to: its module ships templates/swagger/v1_json.tmpl.
const gtModule = "code.gitea.io/gitea@v1.26.0"

var (
	gtSpecOnce sync.Once
	gtSpec     *openapi3.T
	gtSpecErr  error
)

// gtSpecPath finds v1_json.tmpl in the Gitea module, downloaded through
// the Go module proxy (9 MB, once per machine), unless
// FORGETEST_GITEA_SWAGGER names a copy.
func gtSpecPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(gtSpecEnv); p != "" {
		return p
	}
	out, err := exec.Command("go", "mod", "download", "-json", gtModule).Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		t.Fatalf("Gitea's swagger description: `go mod download -json %s` failed (%v %s): reach the Go module proxy, "+
			"or set %s to a copy of templates/swagger/v1_json.tmpl", gtModule, err, mod.Error, gtSpecEnv)
	}
	return filepath.Join(mod.Dir, "templates", "swagger", "v1_json.tmpl")
}

// gtSpecPaths are the operations the tests validate against.
var gtSpecPaths = []string{
	"/user", "/repos/{owner}/{repo}", "/repos/{owner}/{repo}/labels", "/repos/{owner}/{repo}/issues",
	"/repos/issues/search", "/repos/{owner}/{repo}/issues/{index}", "/repos/{owner}/{repo}/issues/{index}/comments",
	"/repos/{owner}/{repo}/issues/comments/{id}", "/repos/{owner}/{repo}/issues/comments/{id}/reactions",
	"/repos/{owner}/{repo}/issues/{index}/reactions", "/repos/{owner}/{repo}/issues/{index}/timeline",
	"/repos/{owner}/{repo}/issues/{index}/labels", "/repos/{owner}/{repo}/issues/{index}/labels/{id}",
	"/repos/{owner}/{repo}/collaborators/{collaborator}/permission", "/repos/{owner}/{repo}/pulls",
	"/repos/{owner}/{repo}/pulls/{index}",
}

func gtLoadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	path := gtSpecPath(t)
	gtSpecOnce.Do(func() {
		raw, err := os.ReadFile(path)
		if err != nil {
			gtSpecErr = err
			return
		}
		// The file is a Go template of Gitea's: two values are filled in
		// when Gitea serves it.
		raw = bytes.ReplaceAll(raw, []byte("{{.SwaggerAppVer}}"), []byte("1.26.0"))
		raw = bytes.ReplaceAll(raw, []byte("{{.SwaggerAppSubUrl}}"), nil)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			gtSpecErr = err
			return
		}
		all, _ := doc["paths"].(map[string]any)
		kept := map[string]any{}
		for _, p := range gtSpecPaths {
			if all[p] == nil {
				gtSpecErr = fmt.Errorf("the description has no path %s", p)
				return
			}
			kept[p] = all[p]
		}
		doc["paths"] = kept
		if raw, err = json.Marshal(doc); err != nil {
			gtSpecErr = err
			return
		}
		var v2 openapi2.T
		if err := json.Unmarshal(raw, &v2); err != nil {
			gtSpecErr = err
			return
		}
		if gtSpec, gtSpecErr = openapi2conv.ToV3(&v2); gtSpecErr == nil {
			for _, item := range gtSpec.Paths.Map() {
				for _, op := range item.Operations() {
					for _, r := range op.Responses.Map() {
						for _, m := range r.Value.Content {
							nullable(m.Schema, map[*openapi3.Schema]bool{})
						}
					}
				}
			}
		}
	})
	if gtSpecErr != nil {
		t.Fatalf("loading %s: %v", path, gtSpecErr)
	}
	return gtSpec
}

// nullable lets every property of the schema be null: Gitea's
// description (made by go-swagger from its Go types) marks none nullable,
// while Gitea writes a nil pointer as null (milestone, assignee,
// closed_at, a timeline event's label: seen in Gitea 1.26's answers).
func nullable(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	for _, p := range s.Properties {
		if p.Value != nil {
			p.Value.Nullable = true
		}
		nullable(p, seen)
	}
	nullable(s.Items, seen)
	for _, x := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf) {
		nullable(x, seen)
	}
}

// gtCheckResponse validates a response body against the schema the
// description gives for the operation and status (none for a 204).
func gtCheckResponse(t *testing.T, spec *openapi3.T, method, template string, status int, body []byte) {
	t.Helper()
	item := spec.Paths.Value(template)
	if item == nil {
		t.Fatalf("the description has no path %s", template)
	}
	op := item.GetOperation(method)
	if op == nil {
		t.Fatalf("the description has no %s %s", method, template)
	}
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		t.Errorf("%s %s documents no %d response", method, template, status)
		return
	}
	media := ref.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		if len(bytes.TrimSpace(body)) > 0 && status/100 == 2 {
			t.Errorf("%s %s %d: a body where the description has none: %s", method, template, status, body)
		}
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, template, err)
	}
	if err := media.Schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Errorf("%s %s %d does not match Gitea's description:\n%v", method, template, status, err)
	}
}

func gtCall(t *testing.T, g *Gitea, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, g.URL()+"/api/v1"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "token "+g.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestGiteaResponsesMatchSwagger(t *testing.T) {
	spec := gtLoadSpec(t)
	g := NewGitea(t)
	n := g.AddIssue("acme/app", IssueSeed{Title: "a", Body: "text", Labels: []string{"coding agent", "bug"}, Assignees: []string{"alice"}})
	g.AddIssue("acme/app", IssueSeed{Title: "closed", State: "closed"})
	p := g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "p", Labels: []string{"coding agent"}}, Head: "fix"})
	g.AddPull("acme/app", PullSeed{IssueSeed: IssueSeed{Title: "from a fork"}, Head: "fix", HeadRepo: "forker/app", Draft: true})
	theirs := g.AddComment("acme/app", n, "alice", "please")
	mine := "/repos/acme/app/issues/comments/" + strconv.FormatInt(g.AddComment("acme/app", n, g.BotUsername, "- [ ] step"), 10)
	g.SetPermission("acme/app", "max", "write")
	g.CommitFile("acme/app", "agent/1", "a.txt", "a\n", "Add a")
	num, pr := strconv.Itoa(n), strconv.Itoa(p)
	const (
		comments = "/repos/{owner}/{repo}/issues/{index}/comments"
		comment  = "/repos/{owner}/{repo}/issues/comments/{id}"
		react    = "/repos/{owner}/{repo}/issues/{index}/reactions"
		perm     = "/repos/{owner}/{repo}/collaborators/{collaborator}/permission"
		pulls    = "/repos/{owner}/{repo}/pulls"
		pull     = "/repos/{owner}/{repo}/pulls/{index}"
		labels   = "/repos/{owner}/{repo}/issues/{index}/labels"
	)
	create := `{"title":"WIP: Work","body":"Closes #1","head":"agent/1","base":"main"}`
	for _, tc := range []struct {
		method, path, body, template string
		status                       int
		// undocumented: Gitea answers a status its description lacks
		// (seen on Gitea 1.26).
		undocumented bool
	}{
		{"GET", "/user", "", "/user", 200, false},
		{"GET", "/repos/acme/app", "", "/repos/{owner}/{repo}", 200, false},
		{"GET", "/repos/acme/nothing", "", "/repos/{owner}/{repo}", 404, false},
		{"GET", "/repos/acme/app/labels?page=1&limit=50", "", "/repos/{owner}/{repo}/labels", 200, false},
		{"POST", "/repos/acme/app/labels", `{"name":"x","color":"#00aabb"}`, "/repos/{owner}/{repo}/labels", 201, false},
		{"GET", "/repos/acme/app/issues?state=all&labels=coding+agent", "", "/repos/{owner}/{repo}/issues", 200, false},
		{"GET", "/repos/issues/search?owner=acme&labels=coding+agent", "", "/repos/issues/search", 200, false},
		{"GET", "/repos/acme/app/issues/" + num, "", "/repos/{owner}/{repo}/issues/{index}", 200, false},
		{"GET", "/repos/acme/app/issues/" + pr, "", "/repos/{owner}/{repo}/issues/{index}", 200, false},
		{"GET", "/repos/acme/app/issues/99", "", "/repos/{owner}/{repo}/issues/{index}", 404, false},
		{"GET", "/repos/acme/app/issues/" + num + "/comments", "", comments, 200, false},
		{"POST", "/repos/acme/app/issues/" + num + "/comments", `{"body":"hi"}`, comments, 201, false},
		{"PATCH", mine, `{"body":"- [x] step"}`, comment, 200, false},
		{"POST", "/repos/acme/app/issues/comments/" + strconv.FormatInt(theirs, 10) + "/reactions", `{"content":"eyes"}`, comment + "/reactions", 201, false},
		{"POST", "/repos/acme/app/issues/comments/" + strconv.FormatInt(theirs, 10) + "/reactions", `{"content":"eyes"}`, comment + "/reactions", 200, false},
		{"POST", "/repos/acme/app/issues/" + num + "/reactions", `{"content":"rocket"}`, react, 201, false},
		{"POST", "/repos/acme/app/issues/" + num + "/reactions", `{"content":"rocket"}`, react, 200, false},
		{"GET", "/repos/acme/app/issues/" + num + "/reactions", "", react, 200, false},
		{"DELETE", "/repos/acme/app/issues/" + num + "/reactions", `{"content":"rocket"}`, react, 204, true},
		{"GET", "/repos/acme/app/issues/" + num + "/timeline", "", "/repos/{owner}/{repo}/issues/{index}/timeline", 200, false},
		{"POST", "/repos/acme/app/issues/" + num + "/labels", `{"labels":[]}`, labels, 200, false},
		{"GET", "/repos/acme/app/collaborators/max/permission", "", perm, 200, false},
		{"GET", "/repos/acme/app/collaborators/acme/permission", "", perm, 200, false},
		{"GET", "/repos/acme/app/pulls?state=open", "", pulls, 200, false},
		{"GET", "/repos/acme/app/pulls/" + pr, "", pull, 200, false},
		{"POST", "/repos/acme/app/pulls", create, pulls, 201, false},
		{"POST", "/repos/acme/app/pulls", create, pulls, 409, false},
		{"PATCH", "/repos/acme/app/pulls/" + pr, `{"body":"text"}`, pull, 201, false},
		{"DELETE", mine, "", comment, 204, false},
	} {
		resp, b := gtCall(t, g, tc.method, tc.path, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, b)
			continue
		}
		if !tc.undocumented {
			gtCheckResponse(t, spec, tc.method, tc.template, tc.status, b)
		}
	}
}

// TestGiteaSwaggerCheckFails makes sure the validation above can fail.
func TestGiteaSwaggerCheckFails(t *testing.T) {
	spec := gtLoadSpec(t)
	op := spec.Paths.Value("/repos/{owner}/{repo}/issues/{index}").GetOperation(http.MethodGet)
	schema := op.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	if err := schema.VisitJSON(map[string]any{"number": "not a number"}); err == nil {
		t.Fatal("an issue with a string for its number passed validation")
	}
}
