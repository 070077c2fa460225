// Package deploy_test checks the files that run coding-agent as a service:
// the Dockerfile, compose.yaml (at the repository's root) and the systemd
// unit beside this file, with the validators that run on this machine.
// Images cannot be built here (no Docker daemon): what an image does at run
// time is not tested.
package deploy_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/coding-agent/coding-agent/internal/config"
)

// composeEnv is what a user's .env gives the compose file.
var composeEnv = map[string]string{"POSTGRES_PASSWORD": "pg-pass-for-test", "RABBITMQ_PASSWORD": "mq-pass-for-test"}

// loadCompose loads and validates a compose file against the compose
// specification's JSON schema (compose-go, the loader docker compose uses),
// with every profile enabled.
func loadCompose(t *testing.T, body string, env map[string]string) (*types.Project, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// The build context, as in the repository.
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: path}},
		Environment: env,
	}, loader.WithProfiles([]string{"*"}))
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestComposeFileIsValid(t *testing.T) {
	p, err := loadCompose(t, readRepoFile(t, "compose.yaml"), composeEnv)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range p.Services {
			if !yield(n) {
				return
			}
		}
	})
	if want := []string{"agent", "ollama", "postgres", "rabbitmq"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	agent := p.Services["agent"]
	if agent.Build == nil || agent.Build.Target != "full" {
		t.Errorf("agent build %+v: want the Dockerfile's full target (git and Node for the workspaces and npm servers)", agent.Build)
	}
	// The services the agent needs are up and healthy before it starts.
	for _, dep := range []string{"postgres", "rabbitmq", "ollama"} {
		d, ok := agent.DependsOn[dep]
		if !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("agent depends_on %s: %+v, want condition service_healthy", dep, d)
		}
		if hc := p.Services[dep].HealthCheck; hc == nil || len(hc.Test) < 2 || hc.Disable {
			t.Errorf("%s has no healthcheck: %+v", dep, hc)
		}
	}
	if agent.DependsOn["ollama"].Required || !slices.Equal(p.Services["ollama"].Profiles, []string{"ollama"}) {
		t.Errorf("ollama must be optional: under a profile (%v), not required by the agent", p.Services["ollama"].Profiles)
	}
	// What the sandbox's level namespaces (the default) needs from Docker,
	// and the hardening given in exchange.
	for _, opt := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined", "no-new-privileges:true"} {
		if !slices.Contains(agent.SecurityOpt, opt) {
			t.Errorf("agent security_opt %q lacks %s", agent.SecurityOpt, opt)
		}
	}
	if !slices.Equal(agent.CapDrop, []string{"ALL"}) || len(agent.CapAdd) != 0 {
		t.Errorf("agent cap_drop %q, cap_add %q: want every capability dropped, none added", agent.CapDrop, agent.CapAdd)
	}
	// Above shutdown_grace_seconds: the task in hand reaches its checkpoint.
	if g := agent.StopGracePeriod; g == nil || time.Duration(*g) <= config.Default().ShutdownGrace() {
		t.Errorf("agent stop_grace_period %v, want more than shutdown_grace_seconds", g)
	}
	// The passwords come from .env, each where it belongs.
	if !strings.Contains(*agent.Environment["DATABASE_URL"], composeEnv["POSTGRES_PASSWORD"]) ||
		!strings.Contains(*agent.Environment["RABBITMQ_URL"], composeEnv["RABBITMQ_PASSWORD"]) ||
		*p.Services["postgres"].Environment["POSTGRES_PASSWORD"] != composeEnv["POSTGRES_PASSWORD"] ||
		*p.Services["rabbitmq"].Environment["RABBITMQ_DEFAULT_PASS"] != composeEnv["RABBITMQ_PASSWORD"] {
		t.Errorf("the passwords are not wired from the environment")
	}
}

// The variables compose sets on the agent are the ones a config from
// coding-agent init reads, and with them that config uses PostgreSQL and
// RabbitMQ.
func TestComposeWiresTheStarterConfig(t *testing.T) {
	p, err := loadCompose(t, readRepoFile(t, "compose.yaml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for k, v := range p.Services["agent"].Environment {
		if v != nil {
			env[k] = *v
		}
	}
	ref := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)
	read := map[string]bool{}
	for _, forge := range config.Forges {
		for _, provider := range config.Providers {
			data, err := config.Starter(forge, provider, "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var values []string // the file without its comments
			for _, line := range strings.Split(string(data), "\n") {
				if v, _, _ := strings.Cut(line, " #"); !strings.HasPrefix(strings.TrimSpace(v), "#") {
					values = append(values, v)
				}
			}
			for _, m := range ref.FindAllStringSubmatch(strings.Join(values, "\n"), -1) {
				read[m[1]] = true
				if _, ok := env[m[1]]; !ok && !slices.Contains(config.TaskVariables, m[1]) {
					t.Errorf("%s/%s reads ${%s}, which compose does not set on the agent", forge, provider, m[1])
				}
			}
			vars := map[string]string{}
			for k, v := range env {
				vars[k] = v
			}
			for _, v := range config.StarterVariables(forge, provider) {
				vars[v] = "secret-" + v // what .env holds
			}
			c, _, err := config.Parse(data, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
			if err != nil {
				t.Fatalf("%s/%s with the compose environment: %v", forge, provider, err)
			}
			if !c.Database.Postgres() || !strings.Contains(c.Database.URL, "@postgres:5432/") ||
				c.Queue.Type != config.QueueRabbitMQ || !strings.Contains(c.Queue.RabbitMQ.URL, "@rabbitmq:5672/") {
				t.Errorf("%s/%s: database %q, queue %q %q; want the compose services", forge, provider,
					c.Database.URL, c.Queue.Type, c.Queue.RabbitMQ.URL)
			}
			if provider == config.ProviderOllama && c.LLM.Ollama.Endpoint != "http://ollama:11434" {
				t.Errorf("ollama endpoint %q, want the compose service", c.LLM.Ollama.Endpoint)
			}
		}
	}
	for k := range env {
		if !read[k] {
			t.Errorf("compose sets %s on the agent, which no starter config reads", k)
		}
	}
}

// The validator refuses what the specification refuses, and a missing
// password is an error naming it: the checks above can fail.
func TestComposeValidationCanFail(t *testing.T) {
	good := readRepoFile(t, "compose.yaml")
	for name, body := range map[string]string{
		"unknown condition": strings.Replace(good, "condition: service_healthy", "condition: healthy", 1),
		"unknown key":       strings.Replace(good, "stop_grace_period: 30s", "stop_grace_periode: 30s", 1),
		"healthcheck type":  strings.Replace(good, "retries: 12", "retries: many", 1),
	} {
		if body == good {
			t.Fatalf("%s: the mutation did not apply", name)
		}
		if _, err := loadCompose(t, body, composeEnv); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := loadCompose(t, good, map[string]string{"RABBITMQ_PASSWORD": "x"})
	if err == nil || !strings.Contains(err.Error(), "set POSTGRES_PASSWORD in .env") {
		t.Errorf("without POSTGRES_PASSWORD: %v", err)
	}
}

// The agent's listener (server.listen of a config from init, with the
// environment compose gives it) is published, and the agent's health check
// probes it with coding-agent health and the config the agent serves with.
func TestComposePublishesAndChecksTheListener(t *testing.T) {
	p, err := loadCompose(t, readRepoFile(t, "compose.yaml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	if ps := listenerProblems(t, p); len(ps) != 0 {
		t.Errorf("compose.yaml:\n%s", strings.Join(ps, "\n"))
	}
	for _, tc := range [][2]string{
		{"      - ${AGENT_PUBLISH:-127.0.0.1:8080}:8080\n", ""},
		{"${AGENT_PUBLISH:-127.0.0.1:8080}:8080", "${AGENT_PUBLISH:-127.0.0.1:8080}:9090"},
		{`"health", "--config"`, `"version", "--config"`},
		{"SERVER_LISTEN: 0.0.0.0:8080", "SERVER_LISTEN: 127.0.0.1:8080"},
	} {
		bad := strings.Replace(readRepoFile(t, "compose.yaml"), tc[0], tc[1], 1)
		if bad == readRepoFile(t, "compose.yaml") {
			t.Fatalf("the mutation %q did not apply", tc[0])
		}
		p, err := loadCompose(t, bad, composeEnv)
		if err == nil && len(listenerProblems(t, p)) == 0 {
			t.Errorf("%q → %q: not found", tc[0], tc[1])
		}
	}
}

// listenerProblems checks the agent's ports and healthcheck against the
// listener of the starter configs.
func listenerProblems(t *testing.T, p *types.Project) []string {
	t.Helper()
	agent := p.Services["agent"]
	env := map[string]string{}
	for k, v := range agent.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	var ps []string
	configPath := ""
	if i := slices.Index(agent.Command, "--config"); i >= 0 && i+1 < len(agent.Command) {
		configPath = agent.Command[i+1]
	}
	hc := agent.HealthCheck
	if want := []string{"CMD", "coding-agent", "health", "--config", configPath}; hc == nil || hc.Disable || !slices.Equal(hc.Test, want) {
		ps = append(ps, fmt.Sprintf("agent healthcheck %+v, want test %q", hc, want))
	}
	for _, forge := range config.Forges {
		for _, provider := range config.Providers {
			data, err := config.Starter(forge, provider, "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			vars := maps.Clone(env)
			for _, v := range config.StarterVariables(forge, provider) {
				vars[v] = "secret-" + v
			}
			c, _, err := config.Parse(data, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
			if err != nil {
				t.Fatalf("%s/%s: %v", forge, provider, err)
			}
			host, port, err := net.SplitHostPort(c.Server.Listen)
			if err != nil {
				ps = append(ps, fmt.Sprintf("%s/%s: server.listen %q: %v", forge, provider, c.Server.Listen, err))
				continue
			}
			if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
				ps = append(ps, fmt.Sprintf("%s/%s: server.listen %q: the container listens on loopback only, which no published port reaches", forge, provider, c.Server.Listen))
			}
			if !slices.ContainsFunc(agent.Ports, func(pc types.ServicePortConfig) bool {
				return strconv.Itoa(int(pc.Target)) == port && pc.Published != ""
			}) {
				ps = append(ps, fmt.Sprintf("%s/%s: the listener's port %s is not published (ports %+v)", forge, provider, port, agent.Ports))
			}
		}
	}
	if !slices.ContainsFunc(agent.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == configPath && v.ReadOnly }) {
		ps = append(ps, "the config "+configPath+" is not mounted read-only")
	}
	return ps
}
