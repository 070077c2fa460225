package obs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writerEnv makes the test binary a log-writing process (see TestMain).
const writerEnv = "OBS_TEST_LOG_WRITER"

// writerSpec is what one writing process does: Lines records to File, the
// i-th written at Start + i*Step by its clock.
type writerSpec struct {
	File  string
	Proc  int
	Lines int
	Start time.Time
	Step  time.Duration
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		if err := writeLines(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeLines is the body of a writing process: each record says which
// process wrote it, its number and the day its clock was in, with padding
// of varying length (up to 3 KiB) so that a torn or interleaved write
// would show.
func writeLines(raw string) error {
	var s writerSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fmt.Errorf("reading the writer spec: %w", err)
	}
	clk := &clock{t: s.Start}
	log, closer, err := NewLogger(LogOptions{File: s.File, Now: clk.now, MaxAgeDays: -1})
	if err != nil {
		return err
	}
	for i := range s.Lines {
		clk.t = s.Start.Add(time.Duration(i) * s.Step)
		pad := strings.Repeat(strconv.Itoa(i%10), (i*7919+s.Proc*104729)%3000)
		log.Info("task done", "p", s.Proc, "i", i, "day", dayOf(clk.t), "pad", pad)
	}
	return closer.Close()
}

// logLine is what a writing process's record holds.
type logLine struct {
	Msg  string `json:"msg"`
	P    int    `json:"p"`
	I    int    `json:"i"`
	Day  string `json:"day"`
	Pad  string `json:"pad"`
	File string `json:"-"`
}

// readLogs reads every line of file and of the rotated files beside it
// (gzipped ones too); a line that is not one whole record fails the test.
func readLogs(t *testing.T, file string) []logLine {
	t.Helper()
	paths := append(backups(t, file), file)
	var out []logLine
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if raw, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			var l logLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Msg != "task done" || len(l.Pad) != (l.I*7919+l.P*104729)%3000 {
				t.Fatalf("%s line %d is not one whole record (%v): %.200q", filepath.Base(p), n, err, sc.Text())
			}
			l.Pad, l.File = "", filepath.Base(p)
			out = append(out, l)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Several processes append to one log file while their clocks cross
// midnight, each rotating when its clock does: no line is lost, none is
// split or written twice, and every line is in the file of its day (the
// current file holds the new day, the rotated one is named by the old).
func TestProcessesShareOneLogFile(t *testing.T) {
	const procs, lines = 4, 3000
	file := filepath.Join(t.TempDir(), "logs", "agent.log")
	start := time.Date(2026, 3, 1, 23, 0, 0, 0, time.Local)
	step := 2 * time.Hour / lines // midnight at line lines/2
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*strings.Builder, procs)
	for p := range procs {
		spec, _ := json.Marshal(writerSpec{File: file, Proc: p, Lines: lines, Start: start, Step: step})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+string(spec))
		outs[p] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[p], outs[p]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s", p, err, outs[p])
		}
	}
	got := readLogs(t, file)
	seen := make(map[[2]int]int)
	misplaced := 0
	for _, l := range got {
		seen[[2]int{l.P, l.I}]++
		want := "agent.log"
		if l.Day == "2026-03-01" {
			want = "agent-2026-03-01.log"
		}
		if l.File != want {
			misplaced++
			if misplaced <= 3 {
				t.Errorf("line %d of process %d (day %s) is in %s, want %s", l.I, l.P, l.Day, l.File, want)
			}
		}
	}
	lost, twice := 0, 0
	for p := range procs {
		for i := range lines {
			switch seen[[2]int{p, i}] {
			case 0:
				lost++
			case 1:
			default:
				twice++
			}
		}
	}
	t.Logf("%d processes × %d lines: %d lines read, %d lost, %d written more than once, %d in the wrong day's file",
		procs, lines, len(got), lost, twice, misplaced)
	if lost != 0 || twice != 0 || misplaced != 0 {
		t.Errorf("%d lines lost, %d written more than once, %d in the wrong file", lost, twice, misplaced)
	}
}
