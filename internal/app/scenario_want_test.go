package app_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/plan"
)

// scenarioWant is a scenario's want section: how the task ended. Only
// labels is required; everything else is checked when given.
type scenarioWant struct {
	RunError string            `yaml:"run_error"` // a substring of Run's error; empty: Run succeeds
	Labels   []string          `yaml:"labels"`    // the task's labels at the end, in any order
	Files    map[string]string `yaml:"files"`     // workspace file → its exact content
	Record   *recordWant       `yaml:"record"`    // the task's row in the store
	History  *[]historyWant    `yaml:"history"`   // the planning history, every entry in order
	Comments *commentsWant     `yaml:"comments"`  // the bot's comments on the task
	// Requests says what model request N (1-based; negative counts from
	// the end) carried.
	Requests map[int]requestWant `yaml:"requests"`
}

type recordWant struct {
	Status    string `yaml:"status"`
	Error     string `yaml:"error"` // a substring
	LLMCalls  *int   `yaml:"llm_calls"`
	ToolCalls *int   `yaml:"tool_calls"`
}

// historyWant is one history entry: its type, and the fields given.
type historyWant struct {
	Type     string   `yaml:"type"`
	Action   string   `yaml:"action"`   // reflection, replan
	Trigger  string   `yaml:"trigger"`  // reflection
	Decision string   `yaml:"decision"` // replan
	Round    int      `yaml:"round"`    // verification
	Passed   *bool    `yaml:"passed"`   // verification
	Actions  []string `yaml:"actions"`  // plan, revision: the action ids in order
}

type commentsWant struct {
	Count *int     `yaml:"count"`
	First textWant `yaml:"first"`
	Last  textWant `yaml:"last"`
	Some  []string `yaml:"some"` // each in at least one comment
	None  []string `yaml:"none"` // each in no comment
	Once  []string `yaml:"once"` // each exactly once across all comments
}

type requestWant struct {
	LastMessage textWant `yaml:"last_message"` // the content of the request's last message
}

type textWant struct {
	Contains []string `yaml:"contains"`
	Lacks    []string `yaml:"lacks"`
}

func (w *scenarioWant) validate(planning bool) error {
	if w.Labels == nil {
		return errors.New("labels is required: every scenario says how the task ended")
	}
	if w.History != nil && !planning {
		return errors.New("history needs planning: true")
	}
	if w.History != nil {
		for i, h := range *w.History {
			if h.Type == "" {
				return fmt.Errorf("history entry %d: type is required", i+1)
			}
		}
	}
	if _, ok := w.Requests[0]; ok {
		return errors.New("requests: 0 is no request: count from 1, or from -1 at the end")
	}
	return nil
}

func (w *scenarioWant) check(t *testing.T, e *env, runErr error) {
	t.Helper()
	switch {
	case w.RunError == "" && runErr != nil:
		t.Fatalf("run: %v", runErr)
	case w.RunError != "" && (runErr == nil || !strings.Contains(runErr.Error(), w.RunError)):
		t.Errorf("run error %v, want one containing %q", runErr, w.RunError)
	}
	want := slices.Sorted(slices.Values(w.Labels))
	if got := e.labels(); !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
	for name, content := range w.Files {
		if got, err := os.ReadFile(filepath.Join(e.workspace, name)); err != nil || string(got) != content {
			t.Errorf("workspace file %s = %q, %v; want %q", name, got, err, content)
		}
	}
	if w.Record != nil {
		w.Record.check(t, e)
	}
	if w.History != nil {
		checkHistoryWant(t, e.history(t), *w.History)
	}
	if w.Comments != nil {
		w.Comments.check(t, e)
	}
	w.checkRequests(t, e)
}

func (w *recordWant) check(t *testing.T, e *env) {
	t.Helper()
	rec := e.record()
	if w.Status != "" && string(rec.Status) != w.Status {
		t.Errorf("record status %q, want %q (error %q)", rec.Status, w.Status, rec.Error)
	}
	if !strings.Contains(rec.Error, w.Error) {
		t.Errorf("record error %q, want one containing %q", rec.Error, w.Error)
	}
	if w.LLMCalls != nil && rec.Counters.LLMCalls != *w.LLMCalls {
		t.Errorf("record llm_calls %d, want %d", rec.Counters.LLMCalls, *w.LLMCalls)
	}
	if w.ToolCalls != nil && rec.Counters.ToolCalls != *w.ToolCalls {
		t.Errorf("record tool_calls %d, want %d", rec.Counters.ToolCalls, *w.ToolCalls)
	}
}

func checkHistoryWant(t *testing.T, got []plan.Entry, want []historyWant) {
	t.Helper()
	var types []string
	for _, en := range got {
		types = append(types, en.Type)
	}
	if len(got) != len(want) {
		t.Errorf("history has %d entries %q, want %d", len(got), types, len(want))
		return
	}
	for i, w := range want {
		en := got[i]
		var bad []string
		add := func(field string, g, w any) { bad = append(bad, fmt.Sprintf("%s %v, want %v", field, g, w)) }
		if !en.Timestamp.Equal(planTime) {
			add("timestamp", en.Timestamp, planTime)
		}
		if en.Type != w.Type {
			add("type", en.Type, w.Type)
		}
		for _, f := range []struct{ name, got, want string }{
			{"action", en.Action, w.Action}, {"trigger", en.Trigger, w.Trigger}, {"decision", en.Decision, w.Decision},
		} {
			if f.want != "" && f.got != f.want {
				add(f.name, f.got, f.want)
			}
		}
		if w.Round != 0 && en.Round != w.Round {
			add("round", en.Round, w.Round)
		}
		if w.Passed != nil && (en.Verification == nil || en.Verification.Passed != *w.Passed) {
			add("passed", en.Verification != nil && en.Verification.Passed, *w.Passed)
		}
		if w.Actions != nil && !slices.Equal(actionIDs(en.Plan), w.Actions) {
			add("actions", actionIDs(en.Plan), w.Actions)
		}
		if bad != nil {
			t.Errorf("history entry %d (of %q): %s", i+1, types, strings.Join(bad, "; "))
		}
	}
}

func (w *commentsWant) check(t *testing.T, e *env) {
	t.Helper()
	c := e.botComments()
	sub := placeholders(e)
	if w.Count != nil && len(c) != *w.Count {
		t.Errorf("%d bot comments, want %d: %q", len(c), *w.Count, c)
	}
	if len(c) > 0 {
		w.First.check(t, "the first comment", c[0], sub)
		w.Last.check(t, "the last comment", c[len(c)-1], sub)
	} else if len(w.First.Contains)+len(w.Last.Contains) > 0 {
		t.Errorf("no bot comments; want a first or last one containing %q", append(w.First.Contains, w.Last.Contains...))
	}
	all := strings.Join(c, "\n")
	for _, s := range w.Some {
		if s = sub.Replace(s); !slices.ContainsFunc(c, func(b string) bool { return strings.Contains(b, s) }) {
			t.Errorf("no comment contains %q: %q", s, c)
		}
	}
	for _, s := range w.None {
		if s = sub.Replace(s); slices.ContainsFunc(c, func(b string) bool { return strings.Contains(b, s) }) {
			t.Errorf("a comment contains %q: %q", s, c)
		}
	}
	for _, s := range w.Once {
		if n := strings.Count(all, sub.Replace(s)); n != 1 {
			t.Errorf("the comments contain %q %d times, want once: %q", s, n, c)
		}
	}
}

func (w *scenarioWant) checkRequests(t *testing.T, e *env) {
	t.Helper()
	reqs := e.model.Requests()
	for _, n := range slices.Sorted(maps.Keys(w.Requests)) {
		rw, i := w.Requests[n], n-1
		if n < 0 {
			i = len(reqs) + n
		}
		if i < 0 || i >= len(reqs) {
			t.Errorf("requests: %d: there were %d requests", n, len(reqs))
			continue
		}
		msgs := reqs[i].Messages
		if len(msgs) == 0 {
			t.Errorf("request %d has no messages", i+1)
			continue
		}
		rw.LastMessage.check(t, fmt.Sprintf("the last message of request %d", i+1), msgs[len(msgs)-1].Content, placeholders(e))
	}
}

func (w textWant) check(t *testing.T, what, text string, sub *strings.Replacer) {
	t.Helper()
	for _, s := range w.Contains {
		if !strings.Contains(text, sub.Replace(s)) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
	for _, s := range w.Lacks {
		if strings.Contains(text, sub.Replace(s)) {
			t.Errorf("%s contains %q:\n%s", what, s, text)
		}
	}
}
