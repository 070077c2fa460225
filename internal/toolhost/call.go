package toolhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// call runs tool on the server; see Host.Call for the two error channels.
func (s *server) call(ctx context.Context, tool string, args map[string]any) (Result, error) {
	full := s.cfg.Name + "/" + tool
	c, err := s.current(ctx)
	if err != nil {
		if sysErr := s.systemError(ctx, full, err); sysErr != nil {
			return Result{}, sysErr
		}
		return s.h.toolError(fmt.Sprintf("MCP server %q is not running and restarting it failed: %v. Its tools are unavailable for now; a later call will try to restart it again.", s.cfg.Name, err)), nil
	}
	base, cancelBase := s.life.bind(ctx)
	defer cancelBase()
	callCtx, cancel := context.WithTimeout(base, s.callTimeout())
	defer cancel()
	start := time.Now()
	done := s.h.asking.start(c.sess, s.cfg.Name, askerOf(ctx))
	defer done()
	res, err := c.sess.CallTool(callCtx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil {
		s.readLinks(callCtx, c.sess, res)
		r := s.h.result(res, s.cfg.InProcess != nil)
		s.log.Debug("MCP tool call", "server", s.cfg.Name, "tool", tool, "duration", time.Since(start),
			"is_error", r.IsError, "bytes", r.Bytes)
		return r, nil
	}
	if sysErr := s.systemError(ctx, full, context.Cause(base)); sysErr != nil {
		return Result{}, sysErr
	}
	switch {
	case callCtx.Err() != nil:
		return s.timedOut(ctx, c, tool)
	case isProtocolError(err):
		return s.h.toolError(fmt.Sprintf("The call to %s failed: %v.", full, err)), nil
	case !isTransportFailure(err) && !c.hasExited() && s.alive(base, c):
		return s.h.toolError(fmt.Sprintf("The call to %s failed: %v.", full, err)), nil
	}
	return s.crashed(ctx, c, full, err)
}

// crashed restarts the server after the call to full broke its connection.
// The call is not run again: it may have done part of its work.
// A remote server's connection is made again instead.
func (s *server) crashed(ctx context.Context, c *conn, full string, cause error) (Result, error) {
	broke, again, fixing := "crashed during", "was restarted", "restarting"
	if s.cfg.URL != "" {
		broke, again, fixing = "lost its connection during", "was connected again", "connecting again to"
	}
	s.log.Warn("MCP server "+broke+" a call; "+fixing+" it", "server", s.cfg.Name, "call", full,
		"error", cause, "stderr", c.proc.stderrTail())
	err := s.replace(ctx, c)
	if err != nil {
		if sysErr := s.systemError(ctx, full, err); sysErr != nil {
			return Result{}, sysErr
		}
		return s.h.toolError(fmt.Sprintf("MCP server %q %s the call to %s, and %s it failed: %v. The call may or may not have taken effect. The server's tools are unavailable for now; a later call will try again.", s.cfg.Name, broke, full, fixing, err)), nil
	}
	return s.h.toolError(fmt.Sprintf("MCP server %q %s the call to %s and %s. The call may or may not have taken effect: check before calling it again.", s.cfg.Name, broke, full, again)), nil
}

// timedOut restarts the server after a call to tool outlived CallTimeout: a
// server that did not answer in time may answer nothing again, and every
// later call to it, from this task or another, would time out too. The call
// is not run again.
func (s *server) timedOut(ctx context.Context, c *conn, tool string) (Result, error) {
	full := s.cfg.Name + "/" + tool
	s.log.Warn("MCP tool call timed out; restarting the server", "server", s.cfg.Name, "tool", tool,
		"timeout", s.callTimeout(), "stderr", c.proc.stderrTail())
	what := fmt.Sprintf("The call to %s timed out after %v and was cancelled", full, s.callTimeout())
	if err := s.replace(ctx, c); err != nil {
		if sysErr := s.systemError(ctx, full, err); sysErr != nil {
			return Result{}, sysErr
		}
		return s.h.toolError(fmt.Sprintf("%s, and restarting MCP server %q failed: %v. The call may or may not have taken effect. The server's tools are unavailable for now; a later call will try to restart it again.", what, s.cfg.Name, err)), nil
	}
	return s.h.toolError(fmt.Sprintf("%s; MCP server %q was restarted, in case it no longer answers. The call may or may not have taken effect: check before calling it again, or ask for less work in one call.", what, s.cfg.Name)), nil
}

// alive pings the server to tell a broken connection from an odd error.
func (s *server) alive(ctx context.Context, c *conn) bool {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	return c.sess.Ping(ctx, nil) == nil
}

// systemError returns the error Call must return when the caller's ctx has
// ended or the server's owner (the host, or the task's session) is closed
// (cause), and nil for everything else.
func (s *server) systemError(ctx context.Context, full string, cause error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("calling MCP tool %s: %w", full, err)
	}
	if errors.Is(cause, ErrClosed) || s.life.ended() {
		return fmt.Errorf("calling MCP tool %s: %w", full, ErrClosed)
	}
	return nil
}

// callTimeout bounds one call of the server's tools.
func (s *server) callTimeout() time.Duration {
	if s.cfg.CallTimeout > 0 {
		return s.cfg.CallTimeout
	}
	return s.h.opts.CallTimeout
}
