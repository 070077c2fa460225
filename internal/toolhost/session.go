package toolhost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// TaskVars are a task's values for the templates of a task-scoped server's
// Command and Env: ${WORKSPACE}, ${TASK_REF} and ${BRANCH}. $${ stands for
// a literal "${"; any other ${...} is kept as written.
type TaskVars struct {
	Workspace string // ${WORKSPACE}: the directory of the task's checkout
	TaskRef   string // ${TASK_REF}: the task, as task.Ref.String writes it
	Branch    string // ${BRANCH}: the branch the task's work goes to
}

// probeValue is TASK_REF and BRANCH when a task-scoped server is probed.
const probeValue = "probe"

// lookup returns the value of the variable name, if it is one of the three.
func (v TaskVars) lookup(name string) (string, bool) {
	switch name {
	case "WORKSPACE":
		return v.Workspace, true
	case "TASK_REF":
		return v.TaskRef, true
	case "BRANCH":
		return v.Branch, true
	}
	return "", false
}

// expand replaces the task's variables in the template s, and $${ with
// "${". It adds to empty the names of the variables s uses that are empty.
func (v TaskVars) expand(s string, empty *[]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		if strings.HasPrefix(s, "$${") {
			b.WriteString("${")
			s = s[3:]
			continue
		}
		if end := strings.IndexByte(s, '}'); strings.HasPrefix(s, "${") && end > 0 {
			if val, ok := v.lookup(s[2:end]); ok {
				if val == "" && !slices.Contains(*empty, s[2:end]) {
					*empty = append(*empty, s[2:end])
				}
				b.WriteString(val)
				s = s[end+1:]
				continue
			}
		}
		b.WriteByte('$')
		s = s[1:]
	}
}

// forTask is the config of a task's instance of the task-scoped server c:
// its Command and Env with the task's variables expanded. A variable they
// use that the task left empty is an error: a server given "" for its
// directory may take the process's own working directory instead.
func (c ServerConfig) forTask(v TaskVars) (ServerConfig, error) {
	var empty []string
	out := c
	out.Command = make([]string, len(c.Command))
	for i, a := range c.Command {
		out.Command[i] = v.expand(a, &empty)
	}
	if c.Env != nil {
		out.Env = make(map[string]string, len(c.Env))
		for k, val := range c.Env {
			out.Env[k] = v.expand(val, &empty)
		}
	}
	out.vars = v
	if len(empty) > 0 {
		slices.Sort(empty)
		return ServerConfig{}, fmt.Errorf("MCP server %q uses ${%s}, which the task leaves empty", c.Name, strings.Join(empty, "}, ${"))
	}
	return out, nil
}

func (c ServerConfig) scope() Scope {
	if c.Scope == "" {
		return ScopeProcess
	}
	return c.Scope
}

// probe starts the task-scoped server cfg once with placeholder variables,
// lists its tools and stops it (see Start). The server it returns holds
// the tools and cfg as configured, and no instance.
func (h *Host) probe(ctx context.Context, cfg ServerConfig) (*server, error) {
	// The workspace is a folder of its own in a folder of its own, as a
	// task's checkout is in its task's folder (a confined server keeps its
	// private folders beside it).
	folder, err := os.MkdirTemp("", "coding-agent-probe-")
	if err != nil {
		return nil, fmt.Errorf("creating the probe's workspace: %w", err)
	}
	defer os.RemoveAll(folder)
	dir := filepath.Join(folder, "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the probe's workspace: %w", err)
	}
	expanded, err := cfg.forTask(TaskVars{Workspace: dir, TaskRef: probeValue, Branch: probeValue})
	if err != nil {
		return nil, err
	}
	s, err := h.startServer(ctx, expanded, h.life, h.log, "")
	if err != nil {
		return nil, fmt.Errorf("probing with WORKSPACE set to an empty directory: %w", err)
	}
	if err := s.close(); err != nil {
		h.log.Warn("stopping the probe of a task-scoped MCP server", "server", cfg.Name, "error", err)
	}
	s.cfg = cfg
	return s, nil
}

// Session is one task's view of the host: its own instances of the
// task-scoped servers, and the host's process-scoped servers. Two sessions
// never share an instance. It is safe for concurrent use.
type Session struct {
	h    *Host
	life *lifetime // ends on Close, or when the host closes
	log  *slog.Logger

	mu        sync.Mutex
	instances map[string]*server // by server name; set once ForTask has started them
	closeOnce sync.Once
	closeErr  error
}

// ForTask starts an instance of every task-scoped server for the task, all
// at once, with vars expanded in its Command and Env. If one cannot start,
// the others are stopped and the error names it. With no task-scoped server
// the session just forwards to the host. Close the session when the task
// ends or pauses.
func (h *Host) ForTask(ctx context.Context, vars TaskVars) (*Session, error) {
	var cfgs []ServerConfig
	for _, srv := range h.servers {
		if srv.cfg.Scope == ScopeTask {
			cfg, err := srv.cfg.forTask(vars)
			if err != nil {
				return nil, fmt.Errorf("starting the MCP servers of task %s: %w", vars.TaskRef, err)
			}
			cfgs = append(cfgs, cfg)
		}
	}
	s := &Session{h: h, life: newLifetime(), log: h.log.With("task", vars.TaskRef)}
	h.mu.Lock()
	if h.life.ended() {
		h.mu.Unlock()
		return nil, fmt.Errorf("starting the MCP servers of task %s: %w", vars.TaskRef, ErrClosed)
	}
	h.sessions[s] = struct{}{}
	h.mu.Unlock()
	started, err := startEach(ctx, cfgs, func(ctx context.Context, cfg ServerConfig) (*server, error) {
		srv, err := h.startServer(ctx, cfg, s.life, s.log, vars.TaskRef)
		if err != nil {
			if s.life.ended() {
				err = fmt.Errorf("%w: %w", ErrClosed, err)
			}
			return nil, fmt.Errorf("starting MCP server %q for task %s: %w", cfg.Name, vars.TaskRef, err)
		}
		s.log.Info("started MCP server for a task", "server", cfg.Name, "tools", len(srv.tools))
		return srv, nil
	})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.ended() { // closed with the host as the servers started
		_ = closeAll(started)
		return nil, fmt.Errorf("starting the MCP servers of task %s: %w", vars.TaskRef, ErrClosed)
	}
	s.instances = make(map[string]*server, len(started))
	for _, srv := range started {
		s.instances[srv.cfg.Name] = srv
	}
	return s, nil
}

// Call calls the tool fullName as Host.Call does: a task-scoped server's
// tool on the session's own instance of it, any other on the host. A tool
// the host's probe listed that the task's instance does not offer is a tool
// error. After Close it returns ErrClosed.
func (s *Session) Call(ctx context.Context, fullName string, args json.RawMessage) (Result, error) {
	return s.h.call(ctx, s.life, s.instances, fullName, args)
}

// Restarts reports how many times the session's instance of the named
// server has been restarted (0 for a server it has no instance of).
func (s *Session) Restarts(server string) int {
	if srv, ok := s.instances[server]; ok {
		return int(srv.restarts.Load())
	}
	return 0
}

// Close stops the session's instances as Host.Close stops servers: calls
// in flight on them are cancelled, each is asked to exit, then signalled.
// Calls to process-scoped servers are the host's and run on.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.life.end()
		s.mu.Lock()
		instances := slices.Collect(maps.Values(s.instances))
		s.mu.Unlock()
		s.closeErr = closeAll(instances)
		s.h.mu.Lock()
		delete(s.h.sessions, s)
		s.h.mu.Unlock()
	})
	return s.closeErr
}

// instance returns a session's instance of the task-scoped server s (from
// the host's catalog) that is to run tool, or a problem for the model.
func instance(instances map[string]*server, s *server, tool string) (*server, string) {
	inst, ok := instances[s.cfg.Name]
	switch {
	case !ok:
		return nil, fmt.Sprintf("MCP server %q runs one instance per task, and this call came from outside a task: there is no instance to call.", s.cfg.Name)
	case !inst.hasTool(tool):
		have := "none"
		if names := inst.toolNames(); len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		return nil, fmt.Sprintf("The tool %q was listed when MCP server %q was probed at startup, but this task's instance of the server does not offer it. Its tools here are: %s.", tool, s.cfg.Name, have)
	}
	return inst, ""
}
