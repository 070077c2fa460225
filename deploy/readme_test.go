package deploy_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/coding-agent/coding-agent/internal/config"
)

// readmeYAML are the README's yaml blocks, each with the heading above it.
func readmeYAML(t *testing.T) (blocks, headings []string) {
	t.Helper()
	heading := ""
	var cur []string
	in := false
	for _, line := range strings.Split(readRepoFile(t, "README.md"), "\n") {
		switch {
		case !in && strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case !in && line == "```yaml":
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks, headings = append(blocks, strings.Join(cur, "\n")+"\n"), append(headings, heading)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks, headings
}

// merge lays a fragment's mappings over base's, key by key; anything else
// in the fragment replaces what base has.
func merge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if b, ok := out[k].(map[string]any); ok {
			if o, ok := v.(map[string]any); ok {
				out[k] = merge(b, o)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Every yaml example of the README is a config the parser accepts (a
// fragment laid over the quickstart's, as the README says to add it), with
// every ${VAR} set and the files it names in place, and each one delivers:
// tasks get a workspace and delivery is on, so done work becomes a commit
// and a pull request. The one example that is not a config (Kubernetes'
// securityContext) is named.
func TestReadmeExamplesParseAndDeliver(t *testing.T) {
	blocks, headings := readmeYAML(t)
	if len(blocks) < 8 {
		t.Fatalf("%d yaml blocks in the README", len(blocks))
	}
	var base map[string]any
	if err := yaml.Unmarshal([]byte(blocks[0]), &base); err != nil || base["task_source"] == nil {
		t.Fatalf("the README's first yaml block is not the quickstart's config: %v", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)`)
	for i, block := range blocks {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
			t.Errorf("%s, block %d: not YAML: %v\n%s", headings[i], i, err, block)
			continue
		}
		if _, ok := doc["securityContext"]; ok && strings.HasPrefix(headings[i], "Deploying with the sandbox") {
			continue // Kubernetes' container settings, not a config
		}
		full := doc
		if doc["task_source"] == nil {
			full = merge(base, doc)
			// "replace token": an app takes the token's place.
			if gh, ok := doc["github"].(map[string]any); ok && gh["app"] != nil {
				delete(full["github"].(map[string]any), "token")
			}
		}
		data, err := yaml.Marshal(full)
		if err != nil {
			t.Fatal(err)
		}
		data = []byte(strings.ReplaceAll(string(data), "/etc/coding-agent/app.pem", pemFile))
		vars := map[string]string{}
		for _, m := range ref.FindAllStringSubmatch(string(data), -1) {
			vars[m[1]] = "value-of-" + m[1]
		}
		vars["DATABASE_URL"] = "postgres://agent:pw@db.example:5432/agent"
		vars["RABBITMQ_URL"] = "amqp://agent:pw@mq.example:5672/"
		c, _, err := config.Parse(data, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
		if err != nil {
			t.Errorf("%s, block %d: the config check refuses it:\n%v\n%s", headings[i], i, err, block)
			continue
		}
		if !c.Delivery.Enabled || !c.TaskWorkspaces() {
			t.Errorf("%s, block %d: delivers nothing (delivery %v, a workspace per task %v): give tasks a workspace "+
				"(the built-in tools, or a scope: task server)\n%s", headings[i], i, c.Delivery.Enabled, c.TaskWorkspaces(), block)
		}
	}
}

// What the agent does on GitHub, and the permission each needs: the
// labels and comments (Issues), the draft pull request (Pull requests),
// the push of the work's branch and its commit (Contents), and reading the
// repository (Metadata). A classic token needs repo (public_repo for
// public repositories only); GitLab's token api (REST and the push over
// HTTPS), with the Developer role to push.
var (
	githubPermissions = []string{"Issues", "Pull requests", "Contents", "Metadata"}
	githubClassic     = "`repo`"
	gitlabScope       = "`api`"
)

// Every place the README says what the bot's token or app needs names
// every permission the agent uses: on GitHub Contents among them, which
// the push of the delivered work needs.
func TestReadmeScopesCoverDelivery(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	paragraphs := strings.Split(readme, "\n\n")
	found := 0
	for _, p := range paragraphs {
		p = strings.Join(strings.Fields(p), " ")
		if !regexp.MustCompile(`(?i)fine-grained|\(permissions:`).MatchString(p) {
			continue
		}
		found++
		for _, perm := range githubPermissions {
			if !strings.Contains(p, perm) {
				t.Errorf("a list of GitHub permissions lacks %s:\n%s", perm, p)
			}
		}
		if strings.Contains(p, "classic") && !strings.Contains(p, githubClassic) {
			t.Errorf("a classic token's scope is not %s:\n%s", githubClassic, p)
		}
		if strings.Contains(p, "GitLab") && (!strings.Contains(p, gitlabScope) || !strings.Contains(p, "Developer")) {
			t.Errorf("GitLab's token: want the %s scope and the Developer role:\n%s", gitlabScope, p)
		}
	}
	if found < 3 {
		t.Errorf("%d paragraphs give GitHub's permissions; the quickstart, \"Who can make it act\" and the GitHub App each should", found)
	}
	// The starter config's comment says the same.
	data, err := config.Starter("github", "openai", "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, perm := range githubPermissions[:3] {
		if !strings.Contains(string(data), perm) {
			t.Errorf("the starter config's token comment lacks %s", perm)
		}
	}
}
