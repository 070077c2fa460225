package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/store"
)

// The run's events (store.Event) are what the task's page shows: each
// model request, each tool call with its arguments and result, the
// comments heard (outsiders' counted, never shown), compactions, checks, a
// server's question, and the end. They are recorded through
// Options.Record, which redacts them; a failure to record is the
// recorder's to log: a page is never worth a task.

// maxArgs bounds a call's arguments in its event.
const maxArgs = 4096

func (r *Run) record(ctx context.Context, e store.Event) {
	if r.e.o.Record != nil {
		e.At = r.e.o.Now()
		r.e.o.Record(ctx, r.in.Task.Ref, e)
	}
}

// roundEvent records the start of a run: a new one, or a resume.
func (r *Run) roundEvent() {
	st := r.st
	title := "run started"
	if st.Calls > 0 || st.Final != nil {
		title = fmt.Sprintf("run resumed from its checkpoint after %d model request(s)", st.Calls)
	}
	t := r.in.Task
	r.record(context.Background(), store.Event{Kind: store.EventRound, Title: title, Text: t.Title, URL: t.URL})
}

// requestEvent completes a request's event with what the reply was: its
// comment, its calls, or why it could not be used.
func requestEvent(e store.Event, a *Act, err error) store.Event {
	if re, ok := errors.AsType[*ReplyError](err); ok {
		e.Title, e.Error = "unusable reply: "+re.Reason, true
		return e
	}
	if a == nil {
		return e
	}
	e.Title = a.Comment
	var tools []string
	for _, c := range a.Calls {
		tools = append(tools, c.Tool)
	}
	if len(a.Object) > 0 { // a planning reply: the plan, the reflection, the verification, whole
		var b bytes.Buffer
		if json.Indent(&b, a.Object, "", "  ") == nil {
			e.Text = cut(b.String(), maxObject)
		}
	}
	switch {
	case e.Title == "" && len(tools) > 0:
		e.Title = "calls " + strings.Join(tools, ", ")
	case e.Title == "" && a.Done:
		e.Title = "done"
	case e.Title == "" && e.Phase != "":
		e.Title = "the " + e.Phase + " reply"
	}
	return e
}

// maxObject bounds a planning reply in its event.
const maxObject = 16384

// heardEvent is a checkpoint check's comments: who was heard, and how many
// were ignored.
func heardEvent(s Steer, phase string) store.Event {
	var who []string
	for _, a := range s.Applied {
		who = append(who, "@"+a.Author)
	}
	title := fmt.Sprintf("%d comment(s) ignored: from people not allowed to steer the task", s.Ignored)
	if len(who) > 0 {
		title = fmt.Sprintf("%d comment(s) handed to the agent, from %s", len(who), strings.Join(who, ", "))
		if s.Ignored > 0 {
			title += fmt.Sprintf("; %d ignored", s.Ignored)
		}
	}
	return store.Event{Kind: store.EventHeard, Phase: phase, Title: title, Count: s.Ignored}
}

// cutArgs is a call's arguments for its event, cut at maxArgs.
func cutArgs(args json.RawMessage) string { return cut(string(args), maxArgs) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
