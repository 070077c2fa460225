package toolhost

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/procgroup"
)

const (
	maxStderrLine  = 2048 // longer stderr lines are logged in pieces
	stderrTailSize = 8    // stderr lines kept for error messages
	waitDelay      = 2 * time.Second
)

// inheritedEnv lists the only variables of our environment a server inherits.
var inheritedEnv = []string{"PATH", "HOME"}

// secretKeyParts mark configured variables whose values are hidden in logged stderr.
var secretKeyParts = []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL"}

// serverEnv is the environment of a server process: its configured Env plus PATH
// and HOME from ours (unless configured). Nothing else leaks, tokens included.
func serverEnv(cfg map[string]string) []string {
	env := make([]string, 0, len(cfg)+len(inheritedEnv))
	for _, k := range inheritedEnv {
		if _, set := cfg[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+cfg[k])
	}
	return env
}

// process is a server subprocess: its handle once started, and its stderr,
// logged line by line and remembered for error messages.
type process struct {
	server string
	log    *slog.Logger
	redact *strings.Replacer

	mu      sync.Mutex
	proc    *os.Process
	partial []byte
	tail    []string
}

func newProcess(cfg ServerConfig, log *slog.Logger) *process {
	var pairs []string
	for k, v := range cfg.Env {
		upper := strings.ToUpper(k)
		if v != "" && slices.ContainsFunc(secretKeyParts, func(p string) bool { return strings.Contains(upper, p) }) {
			pairs = append(pairs, v, "[redacted]")
		}
	}
	return &process{server: cfg.Name, log: log, redact: strings.NewReplacer(pairs...)}
}

// command builds the server's command: restricted environment, stderr to the
// log, killed with us, in a process group of its own so Close can end it all;
// or, for a confined server, the sandbox's command, which brings all that
// itself.
func (p *process) command(cfg ServerConfig) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if cfg.Confine != nil {
		c, err := cfg.Confine(cfg.vars, cfg.Command, cfg.Env)
		if err != nil {
			return nil, fmt.Errorf("confining the server: %w", err)
		}
		cmd = c
	} else {
		cmd = exec.Command(cfg.Command[0], cfg.Command[1:]...)
		cmd.Env = serverEnv(cfg.Env)
		procgroup.Own(cmd)
	}
	cmd.Stderr = p
	cmd.WaitDelay = waitDelay
	return cmd, nil
}

// Write receives the server's stderr.
func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := slices.Index(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			if len(p.partial) >= maxStderrLine {
				p.lineLocked(p.partial)
				p.partial = p.partial[:0]
			}
			break
		}
		p.lineLocked(append(p.partial, b[:i]...))
		p.partial = p.partial[:0]
		b = b[i+1:]
	}
	return n, nil
}

func (p *process) lineLocked(b []byte) {
	line := p.redact.Replace(strings.TrimRight(string(b), "\r"))
	if line == "" {
		return
	}
	p.log.Debug("MCP server stderr", "server", p.server, "line", line)
	if len(p.tail) == stderrTailSize {
		p.tail = p.tail[1:]
	}
	p.tail = append(p.tail, line)
}

// stdoutLine logs a line the server wrote on stdout that is not JSON-RPC
// (messageLines skips it).
func (p *process) stdoutLine(b []byte) {
	line := p.redact.Replace(string(b))
	if len(line) > maxStderrLine {
		line = strings.ToValidUTF8(line[:maxStderrLine], "") + "…"
	}
	p.log.Warn("MCP server wrote a line on stdout that is not JSON-RPC; skipped it", "server", p.server, "line", line, "bytes", len(b))
}

// stderrTail returns the last lines the server wrote on stderr.
func (p *process) stderrTail() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.tail)
	if len(p.partial) > 0 {
		out = append(out, p.redact.Replace(string(p.partial)))
	}
	return out
}

func (p *process) started(proc *os.Process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proc = proc
}

// kill ends the server at once with SIGKILL, and what else runs in its group.
func (p *process) kill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Kill() // a no-op once the process has been waited for
	procgroup.Kill(proc.Pid)
}

// killGroup ends what is left of the server's process group after the server
// itself has ended (helpers it started, for example).
func (p *process) killGroup() {
	if p == nil {
		return
	}
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		procgroup.Kill(proc.Pid)
	}
}
