//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// Enter returns at once: there is no helper off Linux.
func Enter() { entered = true }

// Probe reports that nothing confines commands off Linux.
func Probe() Report {
	r := Report{Best: None}
	for _, n := range append(append([]string(nil), nsLayers...), "landlock", "no_new_privs", "rlimits") {
		r.Layers = append(r.Layers, Layer{Name: n, Detail: "Linux only"})
	}
	return r
}

// Command is a plain process off Linux: the clean environment in d.Work.
func (s *Sandbox) Command(d Dirs, network bool, argv []string, env map[string]string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("prepare command: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = d.Work, s.environ(d, d.Tmp, env)
	return cmd, nil
}

// Run runs r.Command plainly off Linux, with the environment, the output
// bounds and the timeout (which kills the shell only).
func (s *Sandbox) Run(ctx context.Context, r Run) (Result, error) {
	start := time.Now()
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = s.limits.Timeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "/bin/sh", "-c", r.Command)
	cmd.Dir, cmd.Env, cmd.Stdin = r.Work, s.environ(r.Dirs, r.Tmp, s.policy.Env), r.Stdin
	out, errb := newHeadTail(s.limits.MaxOutputBytes), newHeadTail(s.limits.MaxOutputBytes)
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	res := Result{ExitCode: cmd.ProcessState.ExitCode(), Duration: time.Since(start)}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, fmt.Errorf("run command: %w", err)
	}
	res.TimedOut = errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	if res.ExitCode < 0 {
		res.Signal = "killed"
	}
	res.Stdout, res.StdoutDropped = out.bytes()
	res.Stderr, res.StderrDropped = errb.bytes()
	return res, nil
}
