package worker

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/queue/memqueue"
	"github.com/coding-agent/coding-agent/internal/task"
)

// settled records how each delivery of a memqueue was settled.
type settled struct {
	*memqueue.Queue
	mu  sync.Mutex
	how []string // "ack", "release"; a delivery left unsettled adds nothing
}

type recorder struct {
	s *settled
	d queue.Delivery
}

func (r recorder) Ack() error     { r.s.add("ack"); return r.d.Ack() }
func (r recorder) Release() error { r.s.add("release"); return r.d.Release() }

func (s *settled) add(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.how = append(s.how, how)
}

func (s *settled) Take(ctx context.Context) (queue.Delivery, error) {
	d, err := s.Queue.Take(ctx)
	if err != nil {
		return d, err
	}
	return queue.NewDelivery(d.Job, d.Count, d.Dead, recorder{s: s, d: d}), nil
}

func queuedWorld(t *testing.T, opts memqueue.Options) (*world, *settled) {
	wd := newWorld(t, false)
	q := &settled{Queue: memqueue.New(opts)}
	o := wd.w.o
	o.Queue = q
	wd.w = New(o)
	return wd, q
}

// A job is acked once its task has left the consumer's hands; a run
// interrupted by the shutdown leaves its job unsettled, to be delivered
// again and resumed.
func TestConsumeAcksWhenTheTaskLeavesHands(t *testing.T) {
	for _, tc := range []struct {
		end    engine.End
		status task.Status
		how    []string
	}{
		{engine.Done, task.Done, []string{"ack"}},
		{engine.Failed, task.Failed, []string{"ack"}},
		{engine.Paused, task.Paused, []string{"ack"}},
		{engine.Stopped, task.Stopped, []string{"ack"}},
		{engine.Interrupted, task.Queued, nil},
	} {
		t.Run(string(tc.end), func(t *testing.T) {
			wd, q := queuedWorld(t, memqueue.Options{})
			wd.run.out = engine.Outcome{End: tc.end, Summary: "did it", Reason: "because"}
			wd.claim()
			q.Close()
			if err := wd.w.Consume(t.Context()); err != nil {
				t.Fatal(err)
			}
			if wd.run.runs != 1 {
				t.Errorf("%d runs, want 1", wd.run.runs)
			}
			rec, err := wd.st.Get(t.Context(), wd.ref)
			if err != nil || rec.Status != tc.status {
				t.Errorf("record %+v, %v; want %s", rec, err, tc.status)
			}
			if strings.Join(q.how, ",") != strings.Join(tc.how, ",") {
				t.Errorf("settled %q, want %q", q.how, tc.how)
			}
		})
	}
}

// A stale job (its task no longer queued) is acked without a run.
func TestConsumeAcksAStaleJob(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{})
	wd.run.out = engine.Outcome{End: engine.Failed, Reason: "no"}
	wd.claim()
	if err := q.Put(t.Context(), queue.Job{Ref: wd.ref}); err != nil { // waiting already: a no-op
		t.Fatal(err)
	}
	if err := wd.w.Process(t.Context(), wd.ref); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 1 {
		t.Errorf("%d runs, want 1 (the stale job is not run)", wd.run.runs)
	}
	if strings.Join(q.how, ",") != "ack" {
		t.Errorf("settled %q, want the stale job acked", q.how)
	}
}

// A job delivered more than max deliveries times comes dead-lettered: its
// task fails, with a comment saying why, and is not run.
func TestDeadLetteredJobFailsItsTask(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{MaxDeliveries: 1})
	wd.claim()
	// A consumer took the job and went away before its task left its hands.
	d, err := q.Queue.Take(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if wd.run.runs != 0 {
		t.Errorf("%d runs, want none", wd.run.runs)
	}
	wd.want(task.Failed, "bug", testLabels.Failed)
	rec, _ := wd.st.Get(t.Context(), wd.ref)
	if !strings.Contains(rec.Error, memqueue.DeadName) || !strings.Contains(rec.Error, "delivered 2 times") {
		t.Errorf("recorded error %q, want why (delivered 2 times, dead-letter queue %s)", rec.Error, memqueue.DeadName)
	}
	c := wd.comments()
	if len(c) != 1 || !strings.Contains(c[0], "dead-letter queue") {
		t.Errorf("comments %q, want one saying the job went to the dead-letter queue", c)
	}
	if dead := q.Dead(); len(dead) != 1 || dead[0].Ref != wd.ref {
		t.Errorf("dead list %+v, want the task's job", dead)
	}
}

// A final label that cannot be set leaves the task queued for another try:
// with a queue that keeps its jobs (Redeliver) the job is given back at
// once, as nothing else would bring it back while this consumer lives, and
// the next delivery sets the labels and acks it; without, the job is acked
// and the store backlog brings the task back
// (TestFinalLabelFailureIsFinishedByTheNextRun).
func TestConsumeReleasesAJobWhoseLabelsFailed(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{})
	wd.w.o.Redeliver = true
	wd.run.out = engine.Outcome{End: engine.Done, Summary: "did it"}
	wd.claim()
	wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/labels", Status: 500})
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.how, ","); got != "release,ack" {
		t.Errorf("settled %q, want release then ack", got)
	}
	wd.want(task.Done, "bug", testLabels.Done)
}

func TestConsumeAcksAJobWhoseLabelsFailedWhenTheBacklogRetries(t *testing.T) {
	wd, q := queuedWorld(t, memqueue.Options{})
	wd.run.out = engine.Outcome{End: engine.Done, Summary: "did it"}
	wd.claim()
	wd.gh.Inject(forgetest.Fault{Method: "POST", Path: "/labels", Status: 500})
	q.Close()
	if err := wd.w.Consume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.how, ","); got != "ack" {
		t.Errorf("settled %q, want ack", got)
	}
	wd.want(task.Queued, "bug", testLabels.Processing)
}
