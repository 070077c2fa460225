package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type runInput struct {
	Command        string `json:"command" jsonschema:"the shell command line, run by /bin/sh -c in the checkout root"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default and most: the server's limit)"`
}

// commandRun is run_command's structured content: the command and how it
// ended, in the JSON of toolhost.CommandRun, for the host to record as
// evidence of what was run. It is there whenever the command started, and
// never when the Runner could not start it.
type commandRun struct {
	Command  string `json:"command"`
	ExitCode int    `json:"exit_code"` // -1 when it did not exit on its own (a signal, the timeout)
	TimedOut bool   `json:"timed_out,omitempty"`
}

const runDesc = "Run a shell command (sh -c) in the checkout root, such as the build or the tests, and wait for it. " +
	"Answers the exit code, the time taken, stdout and stderr; long output is cut in the middle. " +
	"The call is an error when the command exits non-zero, times out or is killed."

// addRunTool adds run_command to srv.
func (s *server) addRunTool(srv *mcp.Server) {
	desc := fmt.Sprintf("%s The default and longest timeout is %s.", runDesc, s.maxTimeout)
	mcp.AddTool(srv, &mcp.Tool{Name: "run_command", Description: desc, Annotations: writes}, s.runCommand)
}

// runCommand answers run_command. The result is an error (IsError) when the
// command did not exit 0, so that the model notices; its structured content
// says how it ended all the same.
func (s *server) runCommand(ctx context.Context, _ *mcp.CallToolRequest, in runInput) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, nil, fmt.Errorf("running a command: the command is empty")
	}
	timeout, capped := s.timeout(in.TimeoutSeconds)
	ran, err := s.runner.Run(ctx, in.Command, timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("running the command: the sandbox could not start it: %w", err)
	}
	cr := commandRun{Command: in.Command, ExitCode: ran.ExitCode, TimedOut: ran.TimedOut}
	if ran.TimedOut || ran.Signal != "" {
		cr.ExitCode = -1
	}
	var b strings.Builder
	if ran.Note != "" {
		b.WriteString(strings.TrimRight(ran.Note, "\n") + "\n\n")
	}
	b.WriteString(status(ran, timeout))
	if capped {
		fmt.Fprintf(&b, " (timeout_seconds %d was capped at the limit, %s)", in.TimeoutSeconds, s.maxTimeout)
	}
	b.WriteByte('\n')
	stream(&b, "stdout", ran.Stdout, ran.StdoutDropped)
	stream(&b, "stderr", ran.Stderr, ran.StderrDropped)
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: cr,
		IsError:           ran.ExitCode != 0 || ran.TimedOut || ran.Signal != "",
	}
	return res, nil, nil
}

// timeout is the timeout for a call asking for secs seconds, and whether
// the limit cut it.
func (s *server) timeout(secs int) (time.Duration, bool) {
	most := s.maxTimeout
	if secs <= 0 {
		return most, false
	}
	if int64(secs) > int64(most/time.Second) {
		return most, true
	}
	return time.Duration(secs) * time.Second, false
}

// status is the first line of run_command's answer: how the command ended,
// and how long it took.
func status(ran Ran, timeout time.Duration) string {
	took := ran.Duration.Round(time.Millisecond)
	switch {
	case ran.TimedOut:
		return fmt.Sprintf("timed out after %s and was killed (ran %s)", timeout, took)
	case ran.Signal != "":
		return fmt.Sprintf("killed by signal %s after %s", ran.Signal, took)
	}
	return fmt.Sprintf("exit code %d after %s", ran.ExitCode, took)
}

// stream writes one labelled output stream, with the runner's cut noted.
func stream(b *strings.Builder, name, out string, dropped int64) {
	if dropped > 0 {
		fmt.Fprintf(b, "--- %s (cut: its start and end are shown) ---\n", name)
	} else {
		fmt.Fprintf(b, "--- %s ---\n", name)
	}
	switch {
	case out == "" && dropped == 0:
		b.WriteString("(empty)\n")
	case out != "":
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteByte('\n')
		}
	}
	if dropped > 0 {
		fmt.Fprintf(b, "[... %d bytes of output omitted ...]\n", dropped)
	}
}
