package toolhost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxMessageLine is the longest stdout line read: the go-sdk's own limit of
// one JSON-RPC message.
const maxMessageLine = mcp.DefaultMaxLineLength

// errLineTooLong ends a connection whose server wrote a longer line.
var errLineTooLong = fmt.Errorf("the server wrote a line longer than %d bytes on stdout", maxMessageLine)

// stdioTransport runs a server's command and speaks newline-delimited
// JSON-RPC over its stdin and stdout, as mcp.CommandTransport does, except
// that a stdout line that is not a JSON-RPC message (a banner at start, a
// stray print later) is logged and skipped instead of ending the
// connection: the go-sdk reads stdout as one JSON stream and gives up at the
// first thing that is not JSON.
type stdioTransport struct {
	cmd  *exec.Cmd
	proc *process
	// stopTimeout is how long closing waits for the server to exit after
	// closing its input, and again after SIGTERM, before killing it.
	stopTimeout time.Duration
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	t.proc.started(t.cmd.Process)
	lines := &messageLines{r: bufio.NewReader(stdout), skip: t.proc.stdoutLine}
	in := &serverInput{WriteCloser: stdin, cmd: t.cmd, timeout: t.stopTimeout}
	// The connection is closed by closing the server's input, not its output.
	return (&mcp.IOTransport{Reader: io.NopCloser(lines), Writer: in}).Connect(ctx)
}

// messageLines reads a server's stdout and passes on the lines that are
// JSON-RPC messages (a JSON object, or an array of them for a batch). Any
// other line that is not blank goes to skip.
type messageLines struct {
	r    *bufio.Reader
	skip func(line []byte)
	line []byte // the line read last
	out  []byte // what is left of it to pass on
	err  error  // the read error to return once out is passed on
}

func (m *messageLines) Read(p []byte) (int, error) {
	for len(m.out) == 0 {
		if m.err != nil {
			return 0, m.err
		}
		m.next()
	}
	n := copy(p, m.out)
	m.out = m.out[n:]
	return n, nil
}

// next reads one line: a message is passed on, anything else is skipped.
func (m *messageLines) next() {
	m.line = m.line[:0]
	for {
		chunk, err := m.r.ReadSlice('\n')
		m.line = append(m.line, chunk...)
		if len(m.line) > maxMessageLine {
			m.err = errLineTooLong
			return
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			m.err = err
			break
		}
	}
	body := bytes.TrimSpace(m.line)
	switch {
	case len(body) == 0:
	case (body[0] == '{' || body[0] == '[') && json.Valid(body):
		m.out = m.line
	default:
		m.skip(body)
	}
}

// serverInput is a server's stdin. Closing it ends the server as the MCP
// specification asks: the end of its input, then SIGTERM, then SIGKILL,
// each after the stop timeout.
type serverInput struct {
	io.WriteCloser
	cmd     *exec.Cmd
	timeout time.Duration
}

func (s *serverInput) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing the server's input: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(s.timeout)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server process did not exit after SIGKILL")
}
