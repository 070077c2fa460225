package app_test

import (
	"testing"
	"time"
)

// BenchmarkHostsThroughput runs 40 labelled tasks through one host, then
// through two (`serve` processes of the real binary, host_name host-1 and
// host-2, 4 workers each), sharing PostgreSQL and RabbitMQ, with a scripted
// model that takes 1 s to answer; each task is one answer. It reports
// tasks/s from labelling the tasks to the last one done (the hosts are up
// and polling before).
func BenchmarkHostsThroughput(b *testing.B) {
	const tasks, answer = 40, time.Second
	for _, hosts := range []int{1, 2} {
		b.Run(map[int]string{1: "one-host", 2: "two-hosts"}[hosts], func(b *testing.B) {
			f := newFleet(b, fleetSetup{postgres: true, rabbitmq: true})
			f.setAnswer(func(int) { time.Sleep(answer) })
			o := hostOptions{workers: 4, interval: time.Second}
			var procs []*hostProc
			for i := range hosts {
				procs = append(procs, f.start("host-"+string(rune('1'+i)), "serve", o))
			}
			var took time.Duration
			for b.Loop() {
				start := time.Now()
				nums := f.addTasks(tasks, true)
				f.waitLabelled(nums, "coding agent done", fleetWait, procs...)
				took += time.Since(start)
				if twice, dup := f.checkOnce(nums); twice != 0 || dup != 0 {
					b.Fatalf("%d tasks asked the model more than once, %d got more than one comment", twice, dup)
				}
			}
			b.ReportMetric(float64(tasks*b.N)/took.Seconds(), "tasks/s")
			for _, p := range procs {
				if err := p.Stop(30 * time.Second); err != nil {
					b.Errorf("host %s: %v", p.Name, err)
				}
			}
		})
	}
}
