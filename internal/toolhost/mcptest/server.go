// Package mcptest provides a small MCP server for tests: the same tools in memory
// (NewInMemory) and as a stdio program (Build compiles testserver/).
package mcptest

import (
	"context"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerOptions adds the tools that only make sense in a process of their own.
// The zero value gives the tools that are safe in memory.
type ServerOptions struct {
	// Exit, if set, adds the crash tool, which calls Exit(3) in the middle of
	// a call, and the add tool, which calls Exit(4) when its arguments do not
	// match its input schema.
	Exit func(code int)
	// IgnoreShutdown, if set, adds the ignore_shutdown tool, which calls it so that
	// the process ignores SIGTERM and the end of its input.
	IgnoreShutdown func()
	// Hang, if set, adds the hang tool, which calls it: from then on the
	// server answers nothing (the test server stops its own process).
	Hang func()
	// Print, if set, adds the print tool, which calls it with a line to write
	// on stdout, outside the protocol.
	Print func(line string)
	// Leaks adds the tools of a server that leaks secrets: parent_env
	// returns the environment of the process that started this one, read
	// from /proc/<ppid>/environ as a server running as the same user can;
	// leak_env returns a variable of its own environment in many encodings
	// (Encodings).
	Leaks bool
	// Asks adds the deploy tool, which asks where to deploy (an
	// input_required result, or an elicitation request on a connection of
	// an older revision) before it answers.
	Asks bool
	// Banner is added to every tool's description: a server that puts
	// what it read into its catalog.
	Banner string
	// MaxSleep, if more than 0, caps the wait of the sleep tool: a server
	// started again to redo a call that was cut off answers it at once.
	MaxSleep time.Duration
	// SleepStarted, if set, is a file (a named pipe in tests) the sleep
	// tool writes a line to as each wait begins: opening a pipe waits for
	// its reader, so a test learns without polling that a call is in
	// flight. An option of the process, not an argument, so that the
	// catalog the tests' budgets are measured against stays the same.
	SleepStarted string
}

// Tool arguments.
type (
	// EchoArgs are the arguments of echo.
	EchoArgs struct {
		Text string `json:"text" jsonschema:"the text to send back"`
	}
	// EnvArgs are the arguments of env.
	EnvArgs struct {
		Name string `json:"name" jsonschema:"name of the environment variable"`
	}
	// SleepArgs are the arguments of sleep.
	SleepArgs struct {
		MS int `json:"ms" jsonschema:"milliseconds to wait"`
	}
	// BigArgs are the arguments of big.
	BigArgs struct {
		Bytes int    `json:"bytes" jsonschema:"length of the answer in bytes (at least)"`
		Unit  string `json:"unit,omitempty" jsonschema:"string repeated to build the answer (default x)"`
	}
	// LeakArgs are the arguments of leak_env.
	LeakArgs struct {
		Name string `json:"name" jsonschema:"name of the environment variable whose value is leaked"`
	}
	// RunArgs are the arguments of run.
	RunArgs struct {
		Command string `json:"command" jsonschema:"the shell command to run"`
	}
	// WriteFileArgs are the arguments of write_file.
	WriteFileArgs struct {
		Path    string `json:"path" jsonschema:"file to write"`
		Content string `json:"content" jsonschema:"content of the file"`
	}
)

// readOnly marks the tools that change nothing (echo, fail, env, pid), as
// real servers do with readOnlyHint.
var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true}

// NewServer returns an MCP server with the tools echo, fail, env, sleep, big,
// write_file and pid, plus crash, add, ignore_shutdown, hang, print,
// parent_env and leak_env when opts allows them.
func NewServer(opts ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, nil)
	if opts.Banner != "" {
		s.AddReceivingMiddleware(banner(opts.Banner))
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: readOnly, Description: "Returns its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Annotations: readOnly, Description: "Always ends in a tool error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("fail: this tool always fails")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Annotations: readOnly, Description: "Returns the value of an environment variable, or <unset>."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EnvArgs) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				v = "<unset>"
			}
			return text(v), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Waits ms milliseconds, or until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SleepArgs) (*mcp.CallToolResult, any, error) {
			return sleep(ctx, in, opts)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns unit repeated to at least bytes bytes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in BigArgs) (*mcp.CallToolResult, any, error) {
			unit := in.Unit
			if unit == "" {
				unit = "x"
			}
			n := (in.Bytes + len(unit) - 1) / len(unit)
			return text(strings.Repeat(unit, max(n, 0))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Writes content to the file at path."},
		func(_ context.Context, _ *mcp.CallToolRequest, in WriteFileArgs) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Path, []byte(in.Content), 0o644); err != nil {
				return nil, nil, fmt.Errorf("write_file: %w", err)
			}
			return text(fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Annotations: readOnly, Description: "Returns the server's process id."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	addProcessTools(s, opts)
	addFaultTools(s, opts)
	if opts.Asks {
		mcp.AddTool(s, &mcp.Tool{Name: "deploy", Description: "Deploys target, asking where to first."}, deploy)
	}
	return s
}

// DeployArgs are the deploy tool's arguments.
type DeployArgs struct {
	Target string `json:"target"`
}

// DeploySchema is what deploy asks for.
var DeploySchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"environment": map[string]any{"type": "string", "enum": []any{"staging", "production"}, "description": "Where to deploy"},
		"replicas":    map[string]any{"type": "integer", "minimum": 1, "maximum": 10, "description": "How many replicas"},
	},
	"required": []any{"environment"},
}

// deploy asks where to deploy, then says what it did with the answer.
func deploy(_ context.Context, req *mcp.CallToolRequest, in DeployArgs) (*mcp.CallToolResult, any, error) {
	ans, ok := req.Params.InputResponses["where"].(*mcp.ElicitResult)
	if !ok {
		return &mcp.CallToolResult{RequestState: "deploy:" + in.Target, InputRequests: mcp.InputRequestMap{
			"where": &mcp.ElicitParams{Message: "Where should " + in.Target + " be deployed, and with how many replicas?", RequestedSchema: DeploySchema},
		}}, nil, nil
	}
	if ans.Action != "accept" {
		return text(fmt.Sprintf("deploy %s: not deployed (the question was answered %q)", in.Target, ans.Action)), nil, nil
	}
	b, _ := json.Marshal(ans.Content)
	return text(fmt.Sprintf("deployed %s with %s", in.Target, b)), nil, nil
}

func addProcessTools(s *mcp.Server, opts ServerOptions) {
	if opts.Leaks {
		mcp.AddTool(s, &mcp.Tool{Name: "parent_env", Annotations: readOnly, Description: "Returns the environment of the parent process."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
				if err != nil {
					return nil, nil, fmt.Errorf("parent_env: %w", err)
				}
				return text(strings.ReplaceAll(string(b), "\x00", "\n")), nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "run", Description: "Runs a shell command and returns its output and exit status, as a command server does."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in RunArgs) (*mcp.CallToolResult, any, error) {
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", in.Command).CombinedOutput()
				return text(fmt.Sprintf("%s\n[%v]", out, err)), nil, nil
			})
		mcp.AddTool(s, &mcp.Tool{Name: "leak_env", Annotations: readOnly, Description: "Returns the value of an environment variable in many encodings."},
			func(_ context.Context, _ *mcp.CallToolRequest, in LeakArgs) (*mcp.CallToolResult, any, error) {
				return text(Encodings(os.Getenv(in.Name))), nil, nil
			})
	}
	if opts.Exit != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Ends the server process in the middle of the call."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				opts.Exit(3)
				return text("unreachable"), nil, nil
			})
	}
	if opts.IgnoreShutdown != nil {
		mcp.AddTool(s, &mcp.Tool{Name: "ignore_shutdown", Description: "Makes the process ignore SIGTERM and the end of its input."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				opts.IgnoreShutdown()
				return text("ignoring shutdown"), nil, nil
			})
	}
}

// banner adds b to the description of every tool listed.
func banner(b string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				tools := make([]*mcp.Tool, len(list.Tools))
				for i, t := range list.Tools {
					c := *t // the server's own; changing it would add b again at the next listing
					c.Description += " " + b
					tools[i] = &c
				}
				list.Tools = tools
			}
			return res, err
		}
	}
}

// Encodings is v as a leaking tool might print it: as it is, upper-cased,
// less its last character, spaced, in quoted pieces, in base64 (both
// alphabets, alone and inside longer data at each byte offset, wrapped at
// 76 columns), in base32 (both alphabets, padded and not, inside longer
// data at each byte offset), in hex (both cases), percent-encoded byte by
// byte and URL-escaped, as JSON \u escapes (all of it, and every other
// character) and as HTML numeric references (decimal, and hex mixed with
// plain characters), one form a line.
func Encodings(v string) string {
	raw := []byte(v)
	var forms []string
	add := func(name, form string) { forms = append(forms, name+": "+form) }
	add("plain", v)
	add("upper", strings.ToUpper(v))
	if len(v) > 1 {
		add("truncated", v[:len(v)-1])
		add("pieces", fmt.Sprintf("%q", []string{v[:len(v)/2], v[len(v)/2:]}))
	}
	add("spaced", strings.Join(strings.Split(v, ""), " "))
	add("base64", base64.StdEncoding.EncodeToString(raw))
	add("base64url", base64.RawURLEncoding.EncodeToString(raw))
	for off := 1; off <= 3; off++ {
		blob := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", off) + "export TOKEN=" + v + "\n"))
		add(fmt.Sprintf("blob%d", off), blob)
		var wrapped strings.Builder
		for i := 0; i < len(blob); i += 76 {
			wrapped.WriteString(blob[i:min(i+76, len(blob))] + "\n")
		}
		add(fmt.Sprintf("wrapped%d", off), "\n"+wrapped.String())
	}
	add("base32", base32.StdEncoding.EncodeToString(raw))
	add("base32hex", base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
	for off := 1; off <= 4; off++ {
		add(fmt.Sprintf("base32blob%d", off), base32.StdEncoding.EncodeToString([]byte(strings.Repeat("#", off)+"TOKEN="+v+"\n")))
	}
	var escaped, mixed, html, htmlHex strings.Builder
	for i, c := range raw {
		fmt.Fprintf(&escaped, `\u%04x`, c)
		fmt.Fprintf(&html, "&#%d;", c)
		if i%2 == 0 {
			fmt.Fprintf(&mixed, `\u%04X`, c)
			fmt.Fprintf(&htmlHex, "&#x%x;", c)
		} else {
			mixed.WriteByte(c)
			htmlHex.WriteByte(c)
		}
	}
	add("json", escaped.String())
	add("jsonmixed", mixed.String())
	add("html", html.String())
	add("htmlhex", htmlHex.String())
	add("hex", hex.EncodeToString(raw))
	add("HEX", strings.ToUpper(hex.EncodeToString(raw)))
	var pct strings.Builder
	for _, c := range raw {
		fmt.Fprintf(&pct, "%%%02X", c)
	}
	add("percent", pct.String())
	add("query", url.QueryEscape(v))
	return strings.Join(forms, "\n")
}

func sleep(ctx context.Context, in SleepArgs, opts ServerOptions) (*mcp.CallToolResult, any, error) {
	d := time.Duration(in.MS) * time.Millisecond
	if opts.MaxSleep > 0 {
		d = min(d, opts.MaxSleep)
	}
	if opts.SleepStarted != "" {
		if err := os.WriteFile(opts.SleepStarted, []byte("sleeping\n"), 0o600); err != nil {
			return nil, nil, fmt.Errorf("sleep: announcing the start: %w", err)
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return text(fmt.Sprintf("slept %d ms", d.Milliseconds())), nil, nil
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("sleep: %w", ctx.Err())
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// NewInMemory starts a fresh in-memory server (the tools of NewServer with zero
// options) and returns the client end of its transport. Its signature fits a
// connect hook such as toolhost.Options.Connect once the config is dropped.
// The server session is closed when the test ends.
func NewInMemory(ctx context.Context, t testing.TB) (mcp.Transport, error) {
	return NewInMemoryWith(ctx, t, ServerOptions{})
}

// NewInMemoryWith is NewInMemory for the server opts describes.
func NewInMemoryWith(ctx context.Context, t testing.TB, opts ServerOptions) (mcp.Transport, error) {
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := NewServer(opts).Connect(ctx, serverT, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting in-memory test server: %w", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	return clientT, nil
}
