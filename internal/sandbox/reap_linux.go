package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// killTree kills everything the command left. In our own pid namespace
// kill(-1) reaches every process in it but us. Without one (a subreaper),
// every live descendant found in /proc is killed, round after round: the
// children of a killed process become ours, and a process can only fork
// while alive, so the rounds end.
func killTree(subreaper bool) {
	if !subreaper {
		_ = unix.Kill(-1, unix.SIGKILL)
		return
	}
	self := os.Getpid()
	for round := 0; round < 10000; round++ {
		pids := descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		// Let the killed die and their orphans come to us.
		time.Sleep(time.Millisecond)
	}
}

// descendants lists the live (not zombie) descendants of pid from /proc.
func descendants(pid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]int{}
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		ppid, zombie, ok := procParent(p)
		if ok && !zombie {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procParent reads a process's parent and whether it is a zombie.
func procParent(pid int) (ppid int, zombie, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, string(f[0]) == "Z", err == nil
}
