package toolhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pingTimeout bounds the health check after a call failed in an unclear way.
const pingTimeout = 5 * time.Second

// server is one configured MCP server and its current connection: a
// process-scoped server of the host, or a task's instance of a task-scoped
// one (its config expanded for the task).
type server struct {
	h    *Host
	cfg  ServerConfig
	life *lifetime // its owner's: the host's, or the task's session's
	log  *slog.Logger
	// task is the task whose instance this is ("" for the host's): its
	// listing is not warned about again, the probe's was.
	task  string
	tools []Tool
	names map[string]bool // the tools offered: callable
	// schemas are the input schemas of the tools offered, resolved once for
	// checking arguments; a tool whose schema cannot be used has none.
	schemas map[string]*jsonschema.Resolved
	// withheld counts the tools the server listed that its filters withhold.
	withheld int
	// resources are what a process-scoped server listed at its start.
	resources []resource

	lock     chan struct{} // held while reading or replacing live and closed
	live     *conn         // nil while the server is down
	closed   bool
	restarts atomic.Int64
}

// conn is one running instance of a server.
type conn struct {
	sess   *mcp.ClientSession
	proc   *process // nil with Options.Connect
	exited chan struct{}
}

func newConn(sess *mcp.ClientSession, p *process) *conn {
	c := &conn{sess: sess, proc: p, exited: make(chan struct{})}
	go func() {
		_ = sess.Wait()
		close(c.exited)
	}()
	return c
}

func (c *conn) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// stop ends the instance: gracefully (close its input, wait, SIGTERM, SIGKILL)
// or, when kill is set, with SIGKILL at once.
func (c *conn) stop(kill bool) error {
	if kill {
		c.proc.kill()
	}
	err := c.sess.Close()
	c.proc.killGroup()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // it ended, which is what we wanted
	}
	return err
}

// startServer starts cfg for the first time for the owner whose life is
// given (task names a task's instance) and lists its tools.
func (h *Host) startServer(ctx context.Context, cfg ServerConfig, life *lifetime, log *slog.Logger, task string) (*server, error) {
	s := &server{h: h, cfg: cfg, life: life, log: log, task: task, names: map[string]bool{},
		schemas: map[string]*jsonschema.Resolved{}, lock: make(chan struct{}, 1)}
	c, err := s.launch(ctx, func(ctx context.Context, sess *mcp.ClientSession) error {
		if err := s.listTools(ctx, sess); err != nil {
			return err
		}
		s.listResources(ctx, sess)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.live = c
	return s, nil
}

// listTools records the tools of a freshly started server that its
// Allow and Deny globs let through.
func (s *server) listTools(ctx context.Context, sess *mcp.ClientSession) error {
	var listed []string
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if slices.Contains(listed, t.Name) {
			s.log.Warn("MCP server lists a tool twice; keeping the first", "server", s.cfg.Name, "tool", t.Name)
			continue
		}
		listed = append(listed, t.Name)
		if !s.cfg.offers(t.Name) {
			continue
		}
		if s.h.opts.Redact(t.Name) != t.Name {
			s.log.Warn("MCP server names a tool with a secret; withholding it", "server", s.cfg.Name)
			continue
		}
		schema, err := s.schema(t)
		if err != nil {
			return err
		}
		s.names[t.Name] = true
		if rs, err := resolveSchema(schema); err != nil {
			s.log.Warn("MCP tool's input schema cannot be checked; its arguments go unchecked", "server", s.cfg.Name, "tool", t.Name, "error", err)
		} else {
			s.schemas[t.Name] = rs
		}
		readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
		s.tools = append(s.tools, Tool{Server: s.cfg.Name, Name: t.Name, Description: s.h.opts.Redact(t.Description),
			InputSchema: schema, ReadOnly: readOnly})
	}
	s.withheld = len(listed) - len(s.tools)
	if s.task == "" {
		s.warnUnmatched(listed)
	}
	return nil
}

// schema is t's input schema as JSON, redacted. A redaction that broke the
// JSON (a secret spread over several strings) leaves a schema that says
// only that the arguments are an object.
func (s *server) schema(t *mcp.Tool) (json.RawMessage, error) {
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("encoding the input schema of tool %q: %w", t.Name, err)
	}
	red := s.h.opts.Redact(string(raw))
	if red == string(raw) {
		return raw, nil
	}
	if !json.Valid([]byte(red)) {
		s.log.Warn("MCP tool's input schema held a secret; offering it without its schema", "server", s.cfg.Name, "tool", t.Name)
		return json.RawMessage(`{"type":"object"}`), nil
	}
	return json.RawMessage(red), nil
}

// warnUnmatched logs each Allow or Deny glob that matches none of the tools
// the server listed: most likely a misspelt name.
func (s *server) warnUnmatched(listed []string) {
	for _, f := range []struct {
		key   string
		globs []string
	}{{"allow", s.cfg.Allow}, {"deny", s.cfg.Deny}} {
		for _, g := range f.globs {
			if !slices.ContainsFunc(listed, func(n string) bool { ok, _ := path.Match(g, n); return ok }) {
				s.log.Warn("MCP tool filter matches none of the server's tools", "server", s.cfg.Name, "filter", f.key, "glob", g)
			}
		}
	}
	if len(s.tools) == 0 && len(listed) > 0 {
		s.log.Warn("MCP tool filters leave the server no tools", "server", s.cfg.Name, "listed", len(listed))
	}
}

// launch starts one instance of the server and runs ready on it, all within
// StartTimeout and the owner's life.
func (s *server) launch(ctx context.Context, ready func(context.Context, *mcp.ClientSession) error) (*conn, error) {
	h := s.h
	ctx, cancelClosed := s.life.bind(ctx)
	defer cancelClosed()
	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	t, p, err := s.transport(ctx)
	if err != nil {
		return nil, err
	}
	// A server that hangs past the deadline is killed, so the handshake ends.
	stopKill := context.AfterFunc(ctx, p.kill)
	defer stopKill()
	sess, err := h.client.Connect(ctx, t, nil)
	if err != nil {
		p.kill()
		return nil, startError("connecting", ctx, h.opts.StartTimeout, err, p)
	}
	c := newConn(sess, p)
	if ready != nil {
		err = ready(ctx, sess)
	}
	if err == nil && !stopKill() {
		err = ctx.Err() // the deadline passed as we finished
	}
	if err != nil {
		_ = c.stop(true)
		return nil, startError("", ctx, h.opts.StartTimeout, err, p)
	}
	return c, nil
}

// transport returns how to reach the server: in process, over streamable
// HTTP, the Connect hook, or its command.
func (s *server) transport(ctx context.Context) (mcp.Transport, *process, error) {
	if s.cfg.InProcess != nil {
		srv, err := s.cfg.InProcess(s.cfg.vars)
		if err != nil {
			return nil, nil, fmt.Errorf("making the in-process server: %w", err)
		}
		client, own := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, own, nil); err != nil {
			return nil, nil, fmt.Errorf("connecting to the in-process server: %w", err)
		}
		return client, nil, nil
	}
	if s.cfg.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: remoteClient(s.cfg.URL, s.cfg.Headers, s.cfg.OAuth)}, nil, nil
	}
	if connect := s.h.opts.Connect; connect != nil {
		t, err := connect(ctx, s.cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting: %w", err)
		}
		return t, nil, nil
	}
	p := newProcess(s.cfg, s.log)
	cmd, err := p.command(s.cfg)
	if err != nil {
		return nil, nil, err
	}
	return &stdioTransport{cmd: cmd, proc: p, stopTimeout: s.h.opts.StopTimeout}, p, nil
}

// startError explains a failed start (action, if any, says which step), with
// the deadline and the server's last stderr lines when they help.
func startError(action string, ctx context.Context, timeout time.Duration, err error, p *process) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %v)", err, timeout)
	} else if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v: %w", timeout, err)
	}
	if tail := p.stderrTail(); len(tail) > 0 {
		err = fmt.Errorf("%w; server stderr: %s", err, strings.Join(tail, " | "))
	}
	if action == "" {
		return err
	}
	return fmt.Errorf("%s: %w", action, err)
}

func (s *server) hasTool(name string) bool { return s.names[name] }

func (s *server) toolNames() []string {
	out := make([]string, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.Name
	}
	return out
}

func (s *server) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *server) release() { <-s.lock }

// current returns the running instance, restarting the server if it has exited.
func (s *server) current(ctx context.Context) (*conn, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	if s.closed {
		return nil, ErrClosed
	}
	if s.live != nil && !s.live.hasExited() {
		return s.live, nil
	}
	if s.live != nil {
		s.log.Warn("MCP server exited; restarting it", "server", s.cfg.Name, "stderr", s.live.proc.stderrTail())
	}
	return s.restartLocked(ctx)
}

// replace restarts the server after a call on broken failed. If another call
// has restarted it already, there is nothing to do.
func (s *server) replace(ctx context.Context, broken *conn) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if s.closed {
		return ErrClosed
	}
	if s.live != nil && s.live != broken {
		return nil
	}
	_, err := s.restartLocked(ctx)
	return err
}

func (s *server) restartLocked(ctx context.Context) (*conn, error) {
	if s.live != nil {
		_ = s.live.stop(true)
		s.live = nil
	}
	c, err := s.launch(ctx, nil)
	if err != nil {
		s.log.Warn("restarting MCP server failed", "server", s.cfg.Name, "error", err)
		return nil, err
	}
	s.live = c
	n := s.restarts.Add(1)
	s.log.Warn("restarted MCP server", "server", s.cfg.Name, "restarts", n)
	return c, nil
}

// close stops the server for good.
func (s *server) close() error {
	s.lock <- struct{}{}
	defer s.release()
	s.closed = true
	if s.live == nil {
		return nil
	}
	err := s.live.stop(false)
	s.live = nil
	if err != nil && s.cfg.URL != "" {
		// The session could not be ended on a remote server (it is gone,
		// or unreachable): nothing of ours is left running; it ends the
		// session itself.
		s.log.Info("could not end the session on the remote MCP server", "server", s.cfg.Name, "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopping MCP server %q: %w", s.cfg.Name, err)
	}
	return nil
}

// isTransportFailure reports an error that says the connection itself broke.
func isTransportFailure(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe)
}

// isProtocolError reports an error answer from the server (unknown tool,
// invalid parameters...): the server is fine, the call was wrong.
func isProtocolError(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr)
}
