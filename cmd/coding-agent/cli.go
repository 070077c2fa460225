package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/obs"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // could not run: forge unreachable at start, MCP server would not start, ...
	exitUsage   = 2 // bad command line or bad config
)

// usage is the command line's help; %[1]s is the forges (task_source's values).
var usage = fmt.Sprintf(`usage: coding-agent <command> [flags]

commands:
  run            one pass: discover labelled tasks, process them all, exit [--dry-run]
  serve          poll every continuous.producer.interval_minutes until SIGINT/SIGTERM
  produce        discover and claim tasks, queue them in the state store [--once]
  consume        process the tasks queued in the state store [--once]
  status         list known tasks with their state and counters [--json]
  pause REF      pause a task at its next checkpoint (adds the paused label)
  resume REF     resume a paused task (removes the paused label)
  stop REF       stop a task at its next checkpoint (adds the stopped label)
  release REF    free a task from the process holding it (one that died or hangs), from any
                 host: the next pass of any process sharing the store takes it over
                 REF is github:owner/repo#12 (! for a pull request) or gitlab:group/project#3 (! for an MR)
  doctor         check every configured service and say what to fix [--fix creates missing labels]
  config check [FILE]
                 validate the config file and list every problem
  init           write a starter config: --forge %[1]s --provider %[2]s
  health         probe the running serve's GET /healthz at server.listen (exit 0 when it answers 200)
  version        print the version and commit (also --version)

Every command but init and version reads --config FILE (default config.yaml).
coding-agent <command> --help lists the command's own flags.
`, strings.Join(config.Forges, "|"), strings.Join(config.Providers, "|"))

// flags are the values a command's flags set.
type flags struct {
	config                  string
	once, json, force       bool
	dryRun, quiet, fix      bool
	forge, provider, output string
	language                string
	set                     map[string]bool // the flags given on the command line
}

// command is one command of the command line.
type command struct {
	name    string // "config check" for the two-word one
	args    string // its positional arguments, for its usage line
	nargs   [2]int // least and most positional arguments
	summary string
	define  func(fs *flag.FlagSet, f *flags) // its own flags
}

func configFlag(fs *flag.FlagSet, f *flags) {
	fs.StringVar(&f.config, "config", "config.yaml", "config file (YAML)")
}

// workFlags are the flags of the commands that work on tasks.
func workFlags(fs *flag.FlagSet, f *flags) {
	configFlag(fs, f)
	fs.BoolVar(&f.quiet, "quiet", false, "no line per task event on the terminal (the log keeps everything)")
}

func onceFlags(fs *flag.FlagSet, f *flags) {
	workFlags(fs, f)
	fs.BoolVar(&f.once, "once", false, "one pass, then exit")
}

const refArg = "REF"

var commands = []command{
	{name: "run", summary: "One pass: discover, claim and process every labelled task, then exit.",
		define: func(fs *flag.FlagSet, f *flags) {
			workFlags(fs, f)
			fs.BoolVar(&f.dryRun, "dry-run", false, "work on the labelled tasks but change nothing on the forge (no label, comment or push): "+
				"print what would be posted; state and workspaces go to a temporary folder")
		}},
	{name: "serve", summary: "Poll every continuous.producer.interval_minutes until SIGINT/SIGTERM.", define: workFlags},
	{name: "produce", summary: "Discover and claim tasks and queue them.", define: onceFlags},
	{name: "consume", summary: "Work on the queued tasks.", define: onceFlags},
	{name: "status", summary: "List the tasks the store knows. Needs no token: only the store's keys of the config are read.",
		define: func(fs *flag.FlagSet, f *flags) {
			configFlag(fs, f)
			fs.BoolVar(&f.json, "json", false, "print the records as JSON")
		}},
	{name: app.SignalPause, args: refArg, nargs: [2]int{1, 1}, summary: "Pause a task at its next checkpoint (adds the paused label).", define: configFlag},
	{name: app.SignalResume, args: refArg, nargs: [2]int{1, 1}, summary: "Resume a paused task (removes the paused label).", define: configFlag},
	{name: app.SignalStop, args: refArg, nargs: [2]int{1, 1}, summary: "Stop a task at its next checkpoint (adds the stopped label).", define: configFlag},
	{name: "release", args: refArg, nargs: [2]int{1, 1},
		summary: "Free a task from the process holding it, from any host sharing the store.", define: configFlag},
	{name: "doctor", summary: "Check the forge account, each repository's access and labels, the model (its tool use too) and the MCP servers; say what to fix.",
		define: func(fs *flag.FlagSet, f *flags) {
			configFlag(fs, f)
			fs.BoolVar(&f.fix, "fix", false, "create the labels the repositories lack")
		}},
	{name: "config check", args: "[FILE]", nargs: [2]int{0, 1},
		summary: "Validate the config file (FILE or --config) and list every problem at once.", define: configFlag},
	{name: "init", summary: "Write a commented starter config, with ${VAR} placeholders for the secrets.",
		define: func(fs *flag.FlagSet, f *flags) {
			fs.StringVar(&f.forge, "forge", "", config.ForgeChoice()+" (required)")
			fs.StringVar(&f.provider, "provider", "", config.ProviderChoice()+" (required)")
			fs.StringVar(&f.output, "output", "config.yaml", "the file to write")
			fs.BoolVar(&f.force, "force", false, "overwrite the file if it exists")
			fs.StringVar(&f.language, "language", config.LanguageEnglish, "en or ja: the language of the agent's comments")
		}},
	{name: "health", summary: "Ask the running serve's listener (server.listen) for GET /healthz: exit 0 when it answers 200, else 1. " +
		"Needs no token: only the server section of the config is read.", define: configFlag},
	{name: "version", summary: "Print the version and the commit it was built from.", define: func(*flag.FlagSet, *flags) {}},
}

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
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	name, rest := args[0], args[1:]
	if name == "config" {
		switch {
		case len(rest) > 0 && rest[0] == "check":
			name, rest = "config check", rest[1:]
		case len(rest) > 0 && helpFlag(rest[0]):
			name = "config check"
		default:
			fmt.Fprint(stderr, "usage: coding-agent config check [FILE] [--config FILE]\n")
			return exitUsage
		}
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		// Before the config is read: a typo is not a config problem.
		fmt.Fprintf(stderr, "coding-agent: unknown command %q\n\n%s", name, usage)
		return exitUsage
	}
	cmd := commands[i]
	var f flags
	pos, code, done := cmd.parse(rest, &f, stdout, stderr)
	if done {
		return code
	}
	switch cmd.name {
	case "version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	case "init":
		return initConfig(f, stdout, stderr)
	case "config check":
		return checkConfig(cmd, f, pos, stdout, stderr)
	case "health":
		cfg, code, ok := loadConfig(f.config, config.LoadServer, stderr)
		if !ok {
			return code
		}
		return health(ctx, cfg, stdout, stderr)
	case "status":
		cfg, code, ok := loadConfig(f.config, config.LoadStore, stderr)
		if !ok {
			return code
		}
		if err := app.Status(ctx, cfg, stdout, app.StatusOptions{JSON: f.json}); err != nil {
			fmt.Fprintf(stderr, "coding-agent status: %v\n", app.Redact(cfg, err.Error()))
			return exitFailure
		}
		return exitOK
	}
	var ref task.Ref
	if cmd.args == refArg {
		var err error
		if ref, err = task.ParseRef(pos[0]); err != nil {
			fmt.Fprintf(stderr, "coding-agent %s: %v\n", cmd.name, err)
			return exitUsage
		}
	}
	cfg, code, ok := loadConfig(f.config, config.Load, stderr)
	if !ok {
		return code
	}
	return runCommand(ctx, cmd.name, f, ref, cfg, stdout, stderr)
}

// helpFlag reports whether arg asks for help, as the flag package reads it.
func helpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// parse reads the command's flags and positional arguments, in any order.
// With done set the command line has been answered (help, or a usage error)
// and code is the exit code.
func (c command) parse(args []string, f *flags, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	fs := flag.NewFlagSet("coding-agent "+c.name, flag.ContinueOnError)
	c.define(fs, f)
	out := stderr
	if slices.ContainsFunc(args, helpFlag) {
		out = stdout // asked for: on stdout, so it pipes
	}
	fs.SetOutput(out)
	fs.Usage = func() {
		line := "usage: coding-agent " + c.name
		if c.args != "" {
			line += " " + c.args
		}
		fmt.Fprintf(out, "%s [flags]\n\n%s\n", line, c.summary)
		if c.args == refArg {
			fmt.Fprintln(out, "REF is github:owner/repo#12 (! for a pull request) or gitlab:group/project#3 (! for a merge request).")
		}
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(out, "\nflags:")
			fs.PrintDefaults()
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, true
			}
			return nil, exitUsage, true
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	switch {
	case len(pos) > c.nargs[1]:
		fmt.Fprintf(stderr, "coding-agent %s: unexpected argument %q\n", c.name, pos[c.nargs[1]])
		return nil, exitUsage, true
	case len(pos) < c.nargs[0]:
		fmt.Fprintf(stderr, "usage: coding-agent %s %s [--config FILE] (REF like github:acme/app#12)\n", c.name, c.args)
		return nil, exitUsage, true
	}
	return pos, exitOK, false
}

// loadConfig loads the config file at path with load; ok is false when the
// command cannot go on, and code is then its exit code.
func loadConfig(path string, load func(string) (*config.Config, []config.Warning, error), stderr io.Writer) (*config.Config, int, bool) {
	cfg, warnings, err := load(path)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(stderr, "config %s:\n%s\n", path, indent(err))
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "write a starter config with `coding-agent init --forge %s --provider %s --output %s`, or name yours with --config FILE\n",
				strings.Join(config.Forges, "|"), strings.Join(config.Providers, "|"), path)
		}
		return nil, exitUsage, false
	}
	return cfg, exitOK, true
}

// checkConfig is config check: the file is FILE or --config, not both.
func checkConfig(cmd command, f flags, pos []string, stdout, stderr io.Writer) int {
	path := f.config
	if len(pos) == 1 {
		if f.set["config"] && f.config != pos[0] {
			fmt.Fprintf(stderr, "coding-agent %s: unexpected argument %q (the file is given by --config already)\n", cmd.name, pos[0])
			return exitUsage
		}
		path = pos[0]
	}
	if _, code, ok := loadConfig(path, config.Check, stderr); !ok {
		return code
	}
	fmt.Fprintln(stdout, "ok")
	return exitOK
}

// initConfig is init: it writes the starter config, never over a file
// unless --force.
func initConfig(f flags, stdout, stderr io.Writer) int {
	if f.forge == "" || f.provider == "" {
		fmt.Fprintf(stderr, "usage: coding-agent init --forge %s --provider %s [--language en|ja] [--output FILE] [--force]\n",
			strings.Join(config.Forges, "|"), strings.Join(config.Providers, "|"))
		return exitUsage
	}
	data, err := config.StarterIn(f.forge, f.provider, f.output, f.language)
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent init: %v\n", err)
		return exitUsage
	}
	mode := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if f.force {
		mode = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	file, err := os.OpenFile(f.output, mode, 0o600)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(stderr, "coding-agent init: %s exists; it is left as it is (--force overwrites it)\n", f.output)
		return exitFailure
	}
	if err == nil {
		_, err = file.Write(data)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent init: writing %s: %v\n", f.output, err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "wrote %s: set %s in the environment, edit the repositories and model, then run `coding-agent config check %s`\n",
		f.output, strings.Join(config.StarterVariables(f.forge, f.provider), ", "), f.output)
	return exitOK
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runCommand(ctx context.Context, cmd string, f flags, ref task.Ref, cfg *config.Config, stdout, stderr io.Writer) int {
	var do func(*app.App) error
	var o app.Options
	if !f.quiet && isTerminal(stderr) {
		o.Terminal = stderr
	}
	switch cmd {
	case "run":
		if f.dryRun {
			o.DryRun = stdout
		}
		do = func(a *app.App) error { return a.Run(ctx) }
	case "serve":
		do = func(a *app.App) error { return a.Serve(ctx) }
	case "produce":
		do = func(a *app.App) error { return a.Produce(ctx, f.once) }
	case "consume":
		do = func(a *app.App) error { return a.Consume(ctx, f.once) }
	case "doctor":
		o.Terminal = nil // its lines are its output
		do = func(a *app.App) error { return a.Doctor(ctx, stdout, f.fix) }
	case app.SignalPause, app.SignalResume, app.SignalStop:
		do = func(a *app.App) error { return a.Signal(ctx, cmd, ref, stdout) }
	case "release":
		do = func(a *app.App) error { return a.Release(ctx, ref, stdout) }
	default:
		fmt.Fprintf(stderr, "coding-agent: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	a, err := app.New(ctx, cfg, o)
	if err != nil {
		fmt.Fprintf(stderr, "coding-agent %s: %v\n", cmd, app.Redact(cfg, err.Error()))
		return exitFailure
	}
	err = do(a)
	failed := err != nil && !errors.Is(err, context.Canceled)
	if failed {
		a.Log.Error(obs.CommandFailed, "command", cmd, "error", err) // the terminal leaves it to the line below
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
