package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // could not run: forge unreachable at start, MCP server would not start, ...
	exitUsage   = 2 // bad command line or bad config
)

const usage = `usage: coding-agent <command> [--config FILE]

commands:
  run            one pass: discover labelled tasks, process them all, exit
  serve          poll every continuous.producer.interval_minutes until SIGINT/SIGTERM
  produce        discover and claim tasks, queue them in the state store [--once]
  consume        process the tasks queued in the state store [--once]
  status         list known tasks with their state and counters
  pause REF      pause a task at its next checkpoint (adds the paused label)
  resume REF     resume a paused task (removes the paused label)
  stop REF       stop a task at its next checkpoint (adds the stopped label)
  release REF    free a task from the process holding it (one that died or hangs), from any
                 host: the next pass of any process sharing the store takes it over
                 REF is github:owner/repo#12 (! for a pull request) or gitlab:group/project#3 (! for an MR)
  config check   validate the config file and list every problem
`

// commands are the commands run knows, besides help.
var commands = []string{"run", "serve", "produce", "consume", "status", "config check",
	app.SignalPause, app.SignalResume, app.SignalStop, "release"}

// signals are the commands that take a task ref.
var signals = []string{app.SignalPause, app.SignalResume, app.SignalStop, "release"}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage) // asked for: on stdout, so it pipes
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	if cmd == "config" {
		if len(rest) == 0 || rest[0] != "check" {
			fmt.Fprint(stderr, "usage: coding-agent config check --config FILE\n")
			return exitUsage
		}
		cmd, rest = "config check", rest[1:]
	}
	if !slices.Contains(commands, cmd) {
		// Before the config is read: a typo is not a config problem.
		fmt.Fprintf(stderr, "coding-agent: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	var ref task.Ref
	if slices.Contains(signals, cmd) {
		// The ref may come before or after the flags.
		var raw string
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			raw, rest = rest[0], rest[1:]
		} else if n := len(rest); n > 0 && !strings.HasPrefix(rest[n-1], "-") && (n < 2 || rest[n-2] != "--config") {
			raw, rest = rest[n-1], rest[:n-1]
		}
		if raw == "" {
			fmt.Fprintf(stderr, "usage: coding-agent %s REF --config FILE (REF like github:acme/app#12)\n", cmd)
			return exitUsage
		}
		var err error
		if ref, err = task.ParseRef(raw); err != nil {
			fmt.Fprintf(stderr, "coding-agent %s: %v\n", cmd, err)
			return exitUsage
		}
	}
	fs := flag.NewFlagSet("coding-agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "config.yaml", "config file (YAML)")
	once := fs.Bool("once", false, "produce/consume: one pass, then exit")
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "coding-agent %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitUsage
	}
	cfg, warnings, err := config.Load(*path)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "config %s:\n%s\n", *path, indent(err))
		return exitUsage
	}
	if cmd == "config check" {
		fmt.Fprintln(stdout, "ok")
		return exitOK
	}
	return runCommand(ctx, cmd, *once, ref, cfg, stdout, stderr)
}

func runCommand(ctx context.Context, cmd string, once bool, ref task.Ref, cfg *config.Config, stdout, stderr io.Writer) int {
	var do func(*app.App) error
	switch cmd {
	case "run":
		do = func(a *app.App) error { return a.Run(ctx) }
	case "serve":
		do = func(a *app.App) error { return a.Serve(ctx) }
	case "produce":
		do = func(a *app.App) error { return a.Produce(ctx, once) }
	case "consume":
		do = func(a *app.App) error { return a.Consume(ctx, once) }
	case "status":
		do = func(a *app.App) error { return a.Status(ctx, stdout) }
	case app.SignalPause, app.SignalResume, app.SignalStop:
		do = func(a *app.App) error { return a.Signal(ctx, cmd, ref, stdout) }
	case "release":
		do = func(a *app.App) error { return a.Release(ctx, ref, stdout) }
	default:
		fmt.Fprintf(stderr, "coding-agent: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	a, err := app.New(ctx, cfg, app.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent %s: %v\n", cmd, app.Redact(cfg, err.Error()))
		return exitFailure
	}
	err = do(a)
	failed := err != nil && !errors.Is(err, context.Canceled)
	if failed {
		a.Log.Error("command failed", "command", cmd, "error", err)
	}
	if cerr := a.Close(); cerr != nil {
		fmt.Fprintf(stderr, "coding-agent %s: closing: %v\n", cmd, app.Redact(cfg, cerr.Error()))
	}
	if failed {
		fmt.Fprintf(stderr, "coding-agent %s: %v\n", cmd, app.Redact(cfg, err.Error()))
		return exitFailure
	}
	return exitOK
}

func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
