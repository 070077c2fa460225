package deploy_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/buildtest"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
)

// The ids the recipes' users get here. None has an entry in /etc/passwd:
// the kernel checks the numbers, not the names.
const (
	containerUID = 10001 // the image's coding-agent (USER 10001)
	serviceUID   = 10002 // a coding-agent user as useradd --system makes it, with its own group
	hostUID      = 1000  // the person who runs docker compose on the host
	testAPIKey   = "sk-deployTestKey0123456789abcdef"
)

// needRoot skips a test that changes users, saying why, unless it runs as
// root or under CI (where it fails instead).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test runs the binary as other users and must run as root under CI")
		}
		t.Skip("runs the binary as uid 10001 and 10002 (setuid): run the test as root")
	}
}

// publicDir is a new directory every user may enter (t.TempDir's are
// root's alone), removed when the test ends.
func publicDir(t *testing.T) string {
	t.Helper()
	return buildtest.PublicDir(t, "", "coding-agent-deploy-")
}

// buildBinary copies the built coding-agent (buildtest.Command) into dir,
// where the service's user may run it.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "coding-agent")
	buildtest.CopyExecutable(t, buildtest.Command(t, "./cmd/coding-agent"), bin)
	return bin
}

// as is a command run as uid:gid with no supplementary group, in dir, with
// env (and PATH).
func as(uid, gid int, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	return cmd
}

// runRecipe runs the recipe's lines that set up files (not those that
// create users, install the binary or start a service) as uid:gid in dir,
// each line through sh after replace.
func runRecipe(t *testing.T, lines []string, uid, gid int, dir string, replace *strings.Replacer) {
	t.Helper()
	skip := regexp.MustCompile(`^(useradd|systemctl|docker|install -m 0755 coding-agent |install -m 0644 deploy/)`)
	ran := 0
	for _, line := range lines {
		if skip.MatchString(line) {
			continue
		}
		cmd := as(uid, gid, dir, nil, "sh", "-ec", replace.Replace(line))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("recipe line %q (as %s): %v\n%s", line, replace.Replace(line), err, out)
		}
		ran++
	}
	if ran == 0 {
		t.Fatalf("no recipe line ran of %q", lines)
	}
}

// unitInstallLines are the install steps at the top of the unit file: the
// comment lines indented three spaces after "Install (as root):".
func unitInstallLines(t *testing.T, unit string) []string {
	t.Helper()
	_, after, ok := strings.Cut(unit, "# Install (as root):\n")
	if !ok {
		t.Fatal("the unit file has no \"Install (as root):\" steps")
	}
	var lines []string
	for _, l := range strings.Split(after, "\n") {
		if !strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "#" {
			break
		}
		if strings.HasPrefix(l, "#   ") && !strings.HasPrefix(l, "#    ") {
			lines = append(lines, strings.TrimPrefix(l, "#   "))
		}
	}
	return lines
}

// readmeComposeLines are the shell lines of the README's compose recipe
// (the sh block after "**Compose**"), comments dropped by sh.
func readmeComposeLines(t *testing.T) []string {
	t.Helper()
	_, after, ok := strings.Cut(readRepoFile(t, "README.md"), "**Compose** (`compose.yaml`)")
	if !ok {
		t.Fatal("the README has no **Compose** section")
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("the README's **Compose** section has no sh block")
	}
	return strings.Split(strings.TrimSpace(block), "\n")
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// service is what the recipe leaves for the service user: its config, its
// working directory and its environment.
type service struct {
	uid, gid int
	config   string
	workDir  string
	env      []string
}

// editForTest points the config init wrote at the emulated forge and
// model, as a user edits the repositories and the model: written in place
// by root, so its owner and mode stay what the recipe made them.
func editForTest(t *testing.T, path, forgeURL, modelURL string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "  # api_url: https://ghe.example.com/api/v3", "  api_url: "+forgeURL+" #", 1)
	s = strings.Replace(s, "    model: gpt-4o\n", "    model: gpt-4o\n    base_url: "+modelURL+"\n", 1)
	if s == string(b) || !strings.Contains(s, forgeURL) || !strings.Contains(s, modelURL) {
		t.Fatalf("the starter config's github.api_url or llm.openai.model line moved:\n%s", b)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkAndStart runs, as the service's user, config check (which must say
// ok) and serve, until coding-agent health (as that user too) says the
// listener answers; then SIGTERM, and serve must exit 0.
func checkAndStart(t *testing.T, bin string, s service, listen string) {
	t.Helper()
	env := append(s.env, "SERVER_LISTEN="+listen)
	out, err := as(s.uid, s.gid, s.workDir, env, bin, "config", "check", "--config", s.config).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("config check as uid %d: %v\n%s", s.uid, err, out)
	}
	var serveOut bytes.Buffer
	serve := as(s.uid, s.gid, s.workDir, env, bin, "serve", "--config", s.config)
	serve.Stdout, serve.Stderr = &serveOut, &serveOut
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	defer func() {
		if serve.ProcessState == nil {
			_ = serve.Process.Kill()
			<-exited
		}
	}()
	var probe []byte
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case err := <-exited:
			t.Fatalf("serve as uid %d exited before it was healthy: %v\n%s", s.uid, err, serveOut.String())
		default:
		}
		probe, err = as(s.uid, s.gid, s.workDir, env, bin, "health", "--config", s.config).CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("coding-agent health as uid %d never passed: %v\n%s\nserve:\n%s", s.uid, err, probe, serveOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(string(probe), "answered 200") {
		t.Errorf("health said %q", probe)
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("serve as uid %d after SIGTERM: %v\n%s", s.uid, err, serveOut.String())
	}
	// It worked where the recipe says: the store in the working directory.
	if _, err := os.Stat(filepath.Join(s.workDir, "data")); err != nil {
		t.Errorf("serve left no store in its working directory: %v", err)
	}
}

// mustRefuse is the failure a recipe without its mode line meets: config
// check as the service's user exits 2 with "permission denied".
func mustRefuse(t *testing.T, bin string, s service) {
	t.Helper()
	cmd := as(s.uid, s.gid, s.workDir, s.env, bin, "config", "check", "--config", s.config)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "permission denied") {
		t.Errorf("config check as uid %d of a config the recipe left unreadable: %v\n%s", s.uid, err, out)
	}
}

func emulators(t *testing.T) (forgeURL, token, modelURL string) {
	gh := forgetest.NewGitHub(t)
	gh.AddRepo("acme/app")
	model := llmtest.NewServer(t, llmtest.Options{APIKey: testAPIKey, Models: []string{"gpt-4o"},
		Responder: func(llmtest.Received) llmtest.Step { return llmtest.Reply{Content: "Hello."} }})
	return gh.URL(), gh.Token, model.OpenAIURL()
}

// The systemd recipe, run as the unit file's header writes it (as root,
// with /etc/coding-agent moved into a test folder and the group
// coding-agent given as its number), leaves a config the service's user
// can read: config check says ok and serve starts, answers the health
// probe and stops on SIGTERM, all as that user. Without its chgrp/chmod
// line, config check is refused (exit 2, permission denied).
func TestSystemdRecipeStartsAsTheServiceUser(t *testing.T) {
	needRoot(t)
	root := publicDir(t)
	bin := buildBinary(t, root)
	forgeURL, token, modelURL := emulators(t)
	lines := unitInstallLines(t, readUnit(t))
	setup := func(t *testing.T, lines []string) service {
		dir := publicDir(t)
		etc := filepath.Join(dir, "etc")
		work := filepath.Join(dir, "var", "lib", "coding-agent") // StateDirectory=, owned by the user, 0750
		if err := os.MkdirAll(work, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(work, serviceUID, serviceUID); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(work, 0o750); err != nil {
			t.Fatal(err)
		}
		group := strconv.Itoa(serviceUID)
		runRecipe(t, lines, 0, 0, dir, strings.NewReplacer(
			"/etc/coding-agent", filepath.Join(etc, "coding-agent"),
			"-g coding-agent", "-g "+group, "chgrp coding-agent", "chgrp "+group, ":coding-agent", ":"+group,
			"coding-agent init", bin+" init"))
		config := filepath.Join(etc, "coding-agent", "config.yaml")
		fi, err := os.Stat(config)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("the recipe leaves config.yaml readable by everyone: %v", fi.Mode())
		}
		if fi, err := os.Stat(filepath.Join(etc, "coding-agent", "env")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the env file (the secrets): %v, %v; want root's alone", fi, err)
		}
		editForTest(t, config, forgeURL, modelURL)
		return service{uid: serviceUID, gid: serviceUID, config: config, workDir: work,
			env: []string{"GITHUB_TOKEN=" + token, "OPENAI_API_KEY=" + testAPIKey}}
	}
	t.Run("as written", func(t *testing.T) {
		checkAndStart(t, bin, setup(t, lines), "127.0.0.1:"+freePort(t))
	})
	t.Run("without the mode line", func(t *testing.T) {
		var fewer []string
		for _, l := range lines {
			if !strings.HasPrefix(l, "chgrp ") && !strings.HasPrefix(l, "chmod ") {
				fewer = append(fewer, l)
			}
		}
		if len(fewer) == len(lines) {
			t.Fatalf("the recipe has no chgrp or chmod line: %q", lines)
		}
		mustRefuse(t, bin, setup(t, fewer))
	})
}

// The compose recipe, run as the README writes it by a user of the host
// (uid 1000), leaves a config the image's user (uid 10001) can read where
// compose mounts it: config check says ok and serve, with the agent's
// environment from compose.yaml (the store and queue of the embedded
// defaults instead of the PostgreSQL and RabbitMQ services, which do not
// run here, and a free port for the listener), starts, answers the health
// probe and stops, all as uid 10001; .env is the user's alone. Without its
// chmod line, config check is refused (exit 2, permission denied).
func TestComposeRecipeStartsAsTheImageUser(t *testing.T) {
	needRoot(t)
	root := publicDir(t)
	bin := buildBinary(t, root)
	forgeURL, token, modelURL := emulators(t)
	p, err := loadCompose(t, readRepoFile(t, "compose.yaml"), composeEnv)
	if err != nil {
		t.Fatal(err)
	}
	agent := p.Services["agent"]
	var env []string
	listen := ""
	for k, v := range agent.Environment {
		switch {
		case v == nil || k == "DATABASE_URL" || k == "QUEUE_TYPE" || k == "RABBITMQ_URL":
		case k == "SERVER_LISTEN":
			listen = *v
		case k == "GITHUB_TOKEN":
			env = append(env, k+"="+token)
		case k == "OPENAI_API_KEY":
			env = append(env, k+"="+testAPIKey)
		default:
			env = append(env, k+"="+*v)
		}
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("compose sets SERVER_LISTEN %q: %v", listen, err)
	}
	lines := readmeComposeLines(t)
	setup := func(t *testing.T, lines []string) service {
		project := filepath.Join(publicDir(t), "project") // the user's folder, where compose.yaml is
		if err := os.Mkdir(project, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(project, hostUID, hostUID); err != nil {
			t.Fatal(err)
		}
		runRecipe(t, lines, hostUID, hostUID, project, strings.NewReplacer("coding-agent init", bin+" init"))
		config := filepath.Join(project, "config.yaml")
		if fi, err := os.Stat(filepath.Join(project, ".env")); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf(".env (the secrets): %v, %v; want the user's alone", fi, err)
		}
		editForTest(t, config, forgeURL, modelURL)
		volume := filepath.Join(publicDir(t), "var-lib-coding-agent") // the agent volume, the image's 10001:10001 folder
		if err := os.Mkdir(volume, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(volume, containerUID, containerUID); err != nil {
			t.Fatal(err)
		}
		return service{uid: containerUID, gid: containerUID, config: config, workDir: volume,
			env: append(env, "QUEUE_TYPE=memory")}
	}
	t.Run("as written", func(t *testing.T) {
		checkAndStart(t, bin, setup(t, lines), net.JoinHostPort(host, freePort(t)))
	})
	t.Run("without the mode line", func(t *testing.T) {
		var fewer []string
		for _, l := range lines {
			if !strings.HasPrefix(l, "chmod ") {
				fewer = append(fewer, l)
			}
		}
		if len(fewer) == len(lines) {
			t.Fatalf("the recipe has no chmod line: %q", lines)
		}
		mustRefuse(t, bin, setup(t, fewer))
	})
	// compose.yaml's header gives the same steps.
	header := readRepoFile(t, "compose.yaml")
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "coding-agent" || f[0] == "chmod") {
			if cmd, _, _ := strings.Cut(l, "#"); !strings.Contains(header, "#   "+strings.TrimSpace(cmd)) {
				t.Errorf("compose.yaml's header lacks the README's step %q", strings.TrimSpace(cmd))
			}
		}
	}
}
