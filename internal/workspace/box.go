package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/sandbox"
	"github.com/coding-agent/coding-agent/internal/toolhost"
	"github.com/coding-agent/coding-agent/internal/workspace/builtin"
)

// BoxOptions configure a Box.
type BoxOptions struct {
	Sandbox *sandbox.Sandbox
	// Network gives the model's commands, the checks and the sandboxed
	// servers the network (sandbox.network: on); setup always has it.
	Network bool
	// Setup runs before the model's first request, and again before a
	// command once a file matching Watch (globs relative to the checkout)
	// changed.
	Setup, Watch []string
	// Checks are workspace.checks, run by the daemon before a round is done.
	Checks []string
	// Timeout bounds each setup command and check; 0: the sandbox's.
	Timeout time.Duration
	// Hide are the daemon's files and folders no command may read (see
	// config.PrivatePaths); the task's own checkout, home and temporary
	// folder stay reachable when one of them holds these.
	Hide []string
	// Redact is applied to what the setup and the checks said before it
	// reaches the model, a comment or the log; nil: nothing is redacted.
	Redact func(string) string
	Logger *slog.Logger
}

// Box runs a task's commands in the task's sandbox: the model's (through the
// built-in tools' run_command), the setup, the checks, and the task's
// sandboxed MCP servers. Every one sees the checkout and a home and a
// temporary folder of the task's own beside it; nothing else of ours.
type Box struct{ o BoxOptions }

// NewBox returns a Box.
func NewBox(o BoxOptions) *Box {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Box{o: o}
}

// Names in a task's folder, beside the checkout and the repository.
const (
	boxDir    = "box"       // the commands' own home and tmp
	setupMark = "setup.sum" // what the watched files were when the setup last ran
)

// Dirs are the folders the commands of the task whose checkout is work see.
func (b *Box) Dirs(work string) sandbox.Dirs {
	folder := filepath.Dir(work)
	return sandbox.Dirs{Work: work, Home: filepath.Join(folder, boxDir, "home"), Tmp: filepath.Join(folder, boxDir, "tmp"),
		Hide: b.o.Hide}
}

// Runner is the built-in tools' run_command for the checkout work.
func (b *Box) Runner(work string) builtin.Runner { return boxRunner{b: b, work: work} }

type boxRunner struct {
	b    *Box
	work string
}

// Run runs the model's command, after the setup again when a watched file
// changed since it last passed.
func (r boxRunner) Run(ctx context.Context, command string, timeout time.Duration) (builtin.Ran, error) {
	note, err := r.b.Setup(ctx, r.work)
	if err != nil {
		return builtin.Ran{}, err
	}
	res, err := r.b.o.Sandbox.Run(ctx, sandbox.Run{Dirs: r.b.Dirs(r.work), Command: command, Network: r.b.o.Network, Timeout: timeout})
	if err != nil {
		return builtin.Ran{}, err
	}
	return builtin.Ran{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Signal: res.Signal, Note: note,
		Stdout: string(res.Stdout), Stderr: string(res.Stderr), StdoutDropped: res.StdoutDropped,
		StderrDropped: res.StderrDropped, Duration: res.Duration}, nil
}

// Setup runs the setup commands in work's sandbox, with the network, the
// first time, and again once the watched files differ from what they were
// when it last ran, and says what it did for the model ("" when nothing
// ran). A failing setup command is reported, not an error, and not run again
// until a watched file changes: the model may fix what it depends on. An
// error is the sandbox's own. A task's commands run one at a time, so its
// setup never runs twice at once.
func (b *Box) Setup(ctx context.Context, work string) (string, error) {
	if len(b.o.Setup) == 0 {
		return "", nil
	}
	sum, files, err := b.watched(work)
	if err != nil {
		return "", err
	}
	mark := filepath.Join(filepath.Dir(work), setupMark)
	last, err := os.ReadFile(mark)
	if err == nil && string(last) == sum {
		return "", nil
	}
	again := err == nil
	var lines []string
	passed := true
	for _, c := range b.o.Setup {
		res, err := b.o.Sandbox.Run(ctx, sandbox.Run{Dirs: b.Dirs(work), Command: c, Network: true, Timeout: b.o.Timeout})
		if err != nil {
			return "", fmt.Errorf("running the setup command %q: %w", c, err)
		}
		lines = append(lines, summary(c, res))
		if res.ExitCode != 0 {
			passed = false
			break
		}
	}
	b.o.Logger.Info("setup ran", "dir", work, "passed", passed, "watched", files)
	if err := os.WriteFile(mark, []byte(sum), 0o600); err != nil {
		return "", fmt.Errorf("recording the setup: %w", err)
	}
	why := "as the workspace opened"
	if again {
		why = "again, because a file it depends on changed (" + strings.Join(files, ", ") + ")"
	}
	network := ", with the network on (your commands run without it)"
	if b.o.Network {
		network = ""
	}
	return b.o.Redact("The daemon ran the repository's setup " + why + network + ":\n" + strings.Join(lines, "\n")), nil
}

// summary is one setup command's line for the model: how it ended and the
// end of what it said.
func summary(command string, res sandbox.Result) string {
	how := fmt.Sprintf("exit %d", res.ExitCode)
	switch {
	case res.TimedOut:
		how = "timed out"
	case res.ExitCode < 0:
		how = "ended by signal " + res.Signal
	}
	s := fmt.Sprintf("- `%s`: %s in %s", command, how, res.Duration.Round(time.Millisecond))
	if res.ExitCode != 0 {
		out := strings.TrimSpace(string(res.Stderr))
		if out == "" {
			out = strings.TrimSpace(string(res.Stdout))
		}
		if len(out) > 2000 {
			out = "…" + out[len(out)-2000:]
		}
		s += "\n" + out
	}
	return s
}

// watched is a digest of the watched files of work (names and contents), and
// the names of those that exist.
func (b *Box) watched(work string) (string, []string, error) {
	h := sha256.New()
	var names []string
	for _, g := range b.o.Watch {
		matches, err := filepath.Glob(filepath.Join(work, g))
		if err != nil {
			return "", nil, fmt.Errorf("setup_watch %q: %w", g, err)
		}
		for _, m := range matches {
			// A regular file only: a link the model made could point at
			// a file of the daemon's.
			if st, err := os.Lstat(m); err != nil || !st.Mode().IsRegular() {
				continue
			}
			data, err := os.ReadFile(m)
			if err != nil {
				continue
			}
			rel, _ := filepath.Rel(work, m)
			names = append(names, rel)
			fmt.Fprintf(h, "%s\x00%d\x00", rel, len(data))
			h.Write(data)
		}
	}
	slices.Sort(names)
	return hex.EncodeToString(h.Sum(nil)), names, nil
}

// Checker runs workspace.checks in work's sandbox; nil when none are configured.
func (b *Box) Checker(work string) engine.Checker {
	if len(b.o.Checks) == 0 {
		return nil
	}
	return boxChecker{b: b, work: work}
}

type boxChecker struct {
	b    *Box
	work string
}

func (c boxChecker) Check(ctx context.Context) ([]engine.CheckResult, error) {
	if _, err := c.b.Setup(ctx, c.work); err != nil {
		return nil, err
	}
	out := make([]engine.CheckResult, 0, len(c.b.o.Checks))
	for _, cmd := range c.b.o.Checks {
		res, err := c.b.o.Sandbox.Run(ctx, sandbox.Run{Dirs: c.b.Dirs(c.work), Command: cmd, Network: c.b.o.Network, Timeout: c.b.o.Timeout})
		if err != nil {
			return nil, fmt.Errorf("running the check %q: %w", cmd, err)
		}
		out = append(out, engine.CheckResult{Command: cmd, ExitCode: res.ExitCode, TimedOut: res.TimedOut,
			Output: c.b.o.Redact(joinOutput(res))})
	}
	return out, nil
}

func joinOutput(res sandbox.Result) string {
	var b strings.Builder
	b.Write(res.Stdout)
	if res.StdoutDropped > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes of output omitted ...]\n", res.StdoutDropped)
	}
	if len(res.Stderr) > 0 && b.Len() > 0 {
		b.WriteString("\n")
	}
	b.Write(res.Stderr)
	if res.StderrDropped > 0 {
		fmt.Fprintf(&b, "\n[... %d bytes of output omitted ...]\n", res.StderrDropped)
	}
	return b.String()
}

// Confine starts a task's sandboxed MCP server in its sandbox (toolhost's
// ServerConfig.Confine): its own env only.
func (b *Box) Confine(vars toolhost.TaskVars, argv []string, env map[string]string) (*exec.Cmd, error) {
	return b.o.Sandbox.Command(b.Dirs(vars.Workspace), b.o.Network, argv, env)
}
