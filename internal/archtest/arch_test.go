// Package archtest holds no code: its test enforces the dependency rules of
// the architecture (docs/design.md) on the non-test imports of every package
// of the module, as `go list` reports them.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/coding-agent/coding-agent"

// The packages by role, relative to the module path.
var (
	taskPkg = "internal/task"
	ports   = []string{"internal/forge", "internal/llm", "internal/store", "internal/queue"}
	// adapters maps each adapter to its port.
	adapters = map[string]string{
		"internal/forge/github":   "internal/forge",
		"internal/forge/gitlab":   "internal/forge",
		"internal/forge/gitea":    "internal/forge",
		"internal/llm/openai":     "internal/llm",
		"internal/llm/ollama":     "internal/llm",
		"internal/llm/tokens":     "internal/llm",
		"internal/llm/record":     "internal/llm",
		"internal/llm/wire":       "internal/llm",
		"internal/store/sqlite":   "internal/store",
		"internal/queue/memqueue": "internal/queue",
		"internal/store/postgres": "internal/store",
		"internal/queue/rabbitmq": "internal/queue",
	}
	core = []string{"internal/engine", "internal/agent", "internal/report", "internal/worker", "internal/toolhost",
		"internal/plan", "internal/watch", "internal/workspace", "internal/workspace/builtin", "internal/metrics", "internal/server",
		"internal/ui"}
	// plumbing is shared code below the adapters: it imports none of the
	// roles, and adapters may import it. postonce is the forge adapters'
	// one retry loop for comment posts; sanitize cleans, fences and redacts
	// untrusted text; procgroup runs a child in a group that dies with us;
	// sandbox runs a command confined.
	plumbing = []string{"internal/httpx", "internal/obs", "internal/forge/postonce", "internal/sanitize", "internal/procgroup", "internal/sandbox"}
	// infra is shared plumbing below the core: it imports none of the roles.
	infra = append([]string{"internal/config"}, plumbing...)
	// roots wire adapters; cmd only reaches them through app.
	roots       = []string{"internal/app", "cmd/coding-agent"}
	testSupport = []string{"internal/buildtest", "internal/forgetest", "internal/golden", "internal/llm/llmtest", "internal/store/storetest",
		"internal/store/postgres/pgtest", "internal/queue/rabbitmq/rmqtest",
		"internal/queue/queuetest", "internal/toolhost/mcptest", "internal/toolhost/mcptest/testserver",
		"internal/archtest",
		"deploy"} // tests only: the Dockerfile, compose.yaml and the systemd unit
	// required must exist: the rules below would pass vacuously without them.
	required = []string{"internal/task", "internal/forge", "internal/llm", "internal/store", "internal/queue",
		"internal/forge/github", "internal/forge/gitlab", "internal/forge/gitea", "internal/llm/openai", "internal/llm/ollama",
		"internal/store/sqlite", "internal/store/postgres", "internal/queue/memqueue", "internal/queue/rabbitmq", "internal/agent", "internal/report",
		"internal/worker", "internal/toolhost", "internal/workspace", "internal/app", "cmd/coding-agent"}
	// vendorSDKs are the forge and model client libraries and the database
	// and broker drivers only adapters use.
	vendorSDKs = []string{"github.com/google/go-github/", "gitlab.com/gitlab-org/api/client-go", "code.gitea.io/sdk/gitea",
		"github.com/openai/openai-go", "github.com/ollama/ollama", "github.com/jackc/pgx/", "github.com/rabbitmq/amqp091-go"}
)

// pkg is what go list says of one package (non-test files only).
type pkg struct {
	ImportPath string
	Imports    []string // direct imports
	Deps       []string // every package it depends on, transitively
	Error      *struct{ Err string }
}

func (p pkg) rel() string { return rel(p.ImportPath) }

func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return ""
}

// ours returns the module's packages in paths, relative to the module path.
func ours(paths []string) []string {
	var r []string
	for _, p := range paths {
		if x := rel(p); x != "" {
			r = append(r, x)
		}
	}
	return r
}

// loadPackages runs go list from the module root on every package.
func loadPackages(t *testing.T) map[string]pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", root, err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.rel()] = p
	}
	for _, r := range required {
		if _, ok := pkgs[r]; !ok {
			t.Errorf("package %s is missing: the dependency rules name it", r)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return pkgs
}

func isAdapter(r string) bool { _, ok := adapters[r]; return ok }

func isVendorSDK(path string) bool {
	for _, v := range vendorSDKs {
		if strings.HasPrefix(path, v) {
			return true
		}
	}
	return false
}

func TestArchitecture(t *testing.T) {
	for _, v := range violations(loadPackages(t)) {
		t.Error(v)
	}
}

// TestRulesCatchViolations feeds the rules a made-up module that breaks
// each of them once, so a rule that stops working fails here.
func TestRulesCatchViolations(t *testing.T) {
	m := func(rs ...string) []string {
		var r []string
		for _, x := range rs {
			r = append(r, module+"/"+x)
		}
		return r
	}
	pkgs := map[string]pkg{}
	add := func(r string, imports, deps []string) {
		pkgs[r] = pkg{ImportPath: module + "/" + r, Imports: imports, Deps: append(deps, imports...)}
	}
	add("internal/task", nil, m("internal/obs"))
	add("internal/forge", m("internal/task", "internal/httpx"), nil)
	add("internal/forge/github", m("internal/forge", "internal/task", "internal/forge/gitlab", "internal/forge/postonce"), nil)
	add("internal/forge/postonce", m("internal/task", "internal/httpx", "internal/forge"), nil)
	add("internal/forge/gitlab", m("internal/forge", "internal/report"), nil)
	add("internal/agent", []string{"github.com/openai/openai-go/v3"}, nil)
	add("internal/worker", m("internal/app"), m("internal/llm/ollama"))
	add("internal/toolhost", m("internal/toolhost/mcptest"), []string{"testing"})
	add("internal/report", m("internal/task"), nil)
	add("internal/config", m("internal/forge"), nil)
	add("internal/newthing", nil, nil)
	add("internal/app", m("internal/forge/github"), nil)
	add("cmd/coding-agent", m("internal/app", "internal/store/sqlite"), nil)

	got := strings.Join(violations(pkgs), "\n")
	for _, want := range []string{
		"internal/task imports internal/obs",
		"port internal/forge depends on internal/httpx",
		"internal/forge/postonce depends on internal/forge: shared plumbing",
		"adapter internal/forge/github imports internal/forge/gitlab",
		"adapter internal/forge/gitlab imports internal/report",
		"core package internal/agent depends on the vendor SDK github.com/openai/openai-go/v3",
		"internal/worker depends on internal/app: the composition root",
		"internal/worker depends on the adapter internal/llm/ollama",
		"internal/toolhost depends on " + module + "/internal/toolhost/mcptest, which is for tests only",
		"internal/toolhost depends on testing, which is for tests only",
		"internal/config depends on internal/forge",
		"package internal/newthing has no role",
		"cmd/coding-agent imports the adapter internal/store/sqlite",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the rules missed %q; they said:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "imports internal/forge/postonce") {
			t.Errorf("the rules refuse an adapter its shared plumbing: %s", line)
		}
		for _, clean := range []string{"internal/report", "internal/app"} {
			for _, subject := range []string{"", "core package ", "package "} {
				if strings.HasPrefix(line, subject+clean+" ") {
					t.Errorf("the rules flag %s, which keeps them: %s", clean, line)
				}
			}
		}
	}
}

// violations applies every rule to pkgs and returns what breaks them, sorted.
func violations(pkgs map[string]pkg) []string {
	var v []string
	for r, p := range pkgs {
		v = append(v, roleViolations(r, p)...)
		v = append(v, wiringViolations(r, p)...)
		v = append(v, testSupportViolations(r, p)...)
	}
	slices.Sort(v)
	return v
}

// roleViolations applies the rule of r's role to what it imports.
func roleViolations(r string, p pkg) []string {
	var v []string
	imports, deps := ours(p.Imports), ours(p.Deps)
	switch {
	case r == taskPkg:
		for _, d := range deps {
			v = append(v, fmt.Sprintf("%s imports %s: task imports nothing of ours", r, d))
		}
	case slices.Contains(ports, r):
		for _, d := range deps {
			if d != taskPkg {
				v = append(v, fmt.Sprintf("port %s depends on %s: a port imports only %s of ours", r, d, taskPkg))
			}
		}
	case isAdapter(r):
		allowed := append([]string{adapters[r], taskPkg}, plumbing...)
		for _, d := range imports {
			if !slices.Contains(allowed, d) {
				v = append(v, fmt.Sprintf("adapter %s imports %s: an adapter imports only its port, %s and shared plumbing", r, d, taskPkg))
			}
		}
		v = append(v, aboveViolations(r, deps)...)
	case slices.Contains(core, r):
		for _, d := range p.Deps {
			if isVendorSDK(d) {
				v = append(v, fmt.Sprintf("core package %s depends on the vendor SDK %s: only adapters use it", r, d))
			}
		}
		v = append(v, aboveViolations(r, deps)...)
	case slices.Contains(infra, r):
		for _, d := range deps {
			if d != taskPkg && !slices.Contains(infra, d) {
				v = append(v, fmt.Sprintf("%s depends on %s: shared plumbing imports only %s and other plumbing", r, d, taskPkg))
			}
		}
	case slices.Contains(roots, r), slices.Contains(testSupport, r):
	default:
		v = append(v, fmt.Sprintf("package %s has no role in the dependency rules: add it to internal/archtest", r))
	}
	return v
}

// aboveViolations: an adapter or core package r depends, directly or not,
// on no adapter but itself and on no composition root; an adapter on no
// core package either.
func aboveViolations(r string, deps []string) []string {
	var v []string
	for _, d := range deps {
		switch {
		case d != r && isAdapter(d):
			v = append(v, fmt.Sprintf("%s depends on the adapter %s: only internal/app wires adapters", r, d))
		case slices.Contains(roots, d) || d == "internal/config":
			v = append(v, fmt.Sprintf("%s depends on %s: the composition root hands it what it needs", r, d))
		case isAdapter(r) && slices.Contains(core, d):
			v = append(v, fmt.Sprintf("adapter %s depends on the core package %s", r, d))
		}
	}
	return v
}

// wiringViolations: no package but internal/app imports an adapter (cmd
// reaches them through app).
func wiringViolations(r string, p pkg) []string {
	if r == "internal/app" || slices.Contains(testSupport, r) {
		return nil
	}
	var v []string
	for _, d := range ours(p.Imports) {
		if isAdapter(d) {
			v = append(v, fmt.Sprintf("%s imports the adapter %s: only internal/app wires adapters", r, d))
		}
	}
	return v
}

// testSupportViolations: test helpers (emulators, scripted servers,
// conformance suites) and package testing stay out of the program.
func testSupportViolations(r string, p pkg) []string {
	if slices.Contains(testSupport, r) {
		return nil
	}
	var v []string
	for _, d := range p.Deps {
		if d == "testing" || slices.Contains(testSupport, rel(d)) {
			v = append(v, fmt.Sprintf("%s depends on %s, which is for tests only", r, d))
		}
	}
	return v
}
