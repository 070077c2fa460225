package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon makes itself non-dumpable first thing (app.Harden), and the
// kernel then gives its children's /proc files, uid_map and gid_map among
// them, to root: a daemon that is not root cannot write the map of a child
// it starts in a new user namespace ("fork/exec: permission denied"), and
// no other process may write it for that child. So the daemon never starts
// a stage in namespaces itself: it starts this relay, a fresh exec of the
// binary and so dumpable again, which starts the stage in them, passes its
// standard streams and descriptors on, forwards SIGTERM, SIGINT and SIGHUP,
// and ends as the stage ends.

// relayCmd is the exec.Cmd that runs stage in the namespaces of flags
// through the relay, with files as descriptors 3 and up.
func relayCmd(flags uintptr, stage string, files ...*os.File) *exec.Cmd {
	return &exec.Cmd{
		Path:       selfExe,
		Args:       []string{os.Args[0], marker, "ns", strconv.FormatUint(uint64(flags), 10), strconv.Itoa(len(files)), stage},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: files,
	}
}

// relay is the relay's work: os.Args[3:] are the clone flags, the number of
// descriptors from 3 to pass on and the stage. It returns the stage's exit
// code, or ends by the signal that ended the stage.
func relay() int {
	if len(os.Args) != 6 {
		fmt.Fprintf(os.Stderr, "sandbox relay: bad arguments %q\n", os.Args[2:])
		return 127
	}
	flags, ferr := strconv.ParseUint(os.Args[3], 10, 64)
	n, nerr := strconv.Atoi(os.Args[4])
	if ferr != nil || nerr != nil || n < 0 || n > 8 {
		fmt.Fprintf(os.Stderr, "sandbox relay: bad arguments %q\n", os.Args[2:])
		return 127
	}
	stage := os.Args[5]
	files := make([]*os.File, n)
	for i := range files {
		files[i] = os.NewFile(uintptr(3+i), "passed")
	}
	// The stage dies with this thread (Pdeathsig): it must not be one the
	// runtime ends.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := &exec.Cmd{
		Path:       selfExe,
		Args:       []string{os.Args[0], marker, stage},
		Env:        []string{},
		Dir:        "/",
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: files,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  uintptr(flags),
			Pdeathsig:   syscall.SIGKILL,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		},
	}
	if err := cmd.Start(); err != nil {
		err = fmt.Errorf("start the %s stage in its namespaces: %w", stage, err)
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		if stage == "run" && n == 2 { // the run stage's status goes on descriptor 4
			_ = json.NewEncoder(files[1]).Encode(status{Err: err.Error()})
		}
		return 127
	}
	for _, f := range files {
		f.Close()
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		signal.Reset()
		_ = unix.Kill(os.Getpid(), ws.Signal())
		return 128 + int(ws.Signal())
	case ok:
		return ws.ExitStatus()
	default:
		fmt.Fprintf(os.Stderr, "sandbox relay: %v\n", err)
		return 127
	}
}
