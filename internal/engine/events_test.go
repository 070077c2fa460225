package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// events keeps what a run records.
type events struct {
	mu sync.Mutex
	es []store.Event
}

func (r *events) record(_ context.Context, _ task.Ref, e store.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.es = append(r.es, e)
}

func (r *events) kinds() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []string
	for _, e := range r.es {
		ks = append(ks, e.Kind)
	}
	return strings.Join(ks, " ")
}

// A run records its steps for the task's page, in order: its start, each
// request with its tokens and the reply's comment, each call with its
// arguments and result, the end; a planning reply with its object whole.
func TestRunRecordsItsEvents(t *testing.T) {
	for loop, want := range map[string]string{
		"plain": "round request call request call request call request end",
		"planning": "round request call request request request call request request call request request request request call " +
			"request request call request request end",
	} {
		t.Run(loop, func(t *testing.T) {
			rec := &events{}
			w := newWorld(t)
			e, err := engine.New(engine.Options{LLM: &model{script: scripts[loop]}, Tools: tools{Host: startHost(t)}, State: w,
				Record: rec.record, Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := policyRun(t, loop, e, w)(); err != nil || out.End != engine.Done {
				t.Fatalf("run: %+v %v", out, err)
			}
			if got := rec.kinds(); got != want {
				t.Errorf("events:\n%s\nwant\n%s", got, want)
			}
			first := rec.es[1]
			if first.Kind != store.EventRequest || first.Title == "" {
				t.Errorf("the first request: %+v", first)
			}
			var call store.Event
			for _, e := range rec.es {
				if e.Kind == store.EventCall {
					call = e
					break
				}
			}
			if call.Title != "test/echo" || !strings.Contains(call.Args, `"text"`) || call.Text == "" {
				t.Errorf("the first call: %+v", call)
			}
			if loop == "planning" {
				for _, e := range rec.es {
					if e.Phase == "planning" && e.Kind == store.EventRequest && !strings.Contains(e.Text, `"action_plan"`) {
						t.Errorf("the plan's request does not hold the plan: %+v", e)
					}
				}
			}
		})
	}
}
