package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/task"
)

var historyRef = task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 7}

func openTestHistory(t *testing.T) *History {
	t.Helper()
	h, err := OpenHistory(filepath.Join(t.TempDir(), "plans", "nested"), historyRef)
	if err != nil {
		t.Fatalf("OpenHistory: %v", err)
	}
	return h
}

func at(minute int) time.Time { return time.Date(2025, 3, 4, 10, minute, 0, 0, time.UTC) }

// sampleEntries is one entry of every type, with their fields filled in.
func sampleEntries() []Entry {
	p1 := validPlan()
	p1.ActionPlan.Actions[0].Status = Pending
	p2 := validPlan()
	p2.ActionPlan.Actions[0].Status, p2.ActionPlan.Actions[0].Summary = Done, "read it"
	p2.ActionPlan.Actions[1].Attempts, p2.ActionPlan.Actions[1].Failure = 1, "tests failed"
	return []Entry{
		{Type: EntryPlan, Timestamp: at(1), Plan: p1},
		{Type: EntryReflection, Timestamp: at(2), Action: "a2", Trigger: "error",
			Evaluation: &Reflection{Status: "failure", Evaluation: "wrong file", PlanRevisionNeeded: true,
				RevisionReason: "edit the other file", RevisionChanges: []string{"a2 edits cmd.go"}}},
		{Type: EntryRevision, Timestamp: at(3), Plan: p2, Reason: "wrong file", Changes: []string{"a2 edits cmd.go"}},
		{Type: EntryVerification, Timestamp: at(4), Round: 1, Verification: &Verification{Passed: false,
			Criteria: []Criterion{{Criterion: "the flag works", Met: false, Evidence: "no test"}}, Missing: []string{"a test"}}},
		{Type: EntryReplan, Timestamp: at(5), Action: "a3", Decision: "skip", Reason: "cannot run tests"},
	}
}

func appendAll(t *testing.T, h *History, entries []Entry) {
	t.Helper()
	for _, e := range entries {
		if err := h.Append(e); err != nil {
			t.Fatalf("Append(%s): %v", e.Type, err)
		}
	}
}

func TestHistoryAppendThenLoad(t *testing.T) {
	h := openTestHistory(t)
	want := sampleEntries()
	appendAll(t, h, want)

	got, err := h.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loaded entries (-want +got):\n%s", diff)
	}
}

func TestHistoryFileIsOneJSONObjectPerLine(t *testing.T) {
	h := openTestHistory(t)
	entries := sampleEntries()
	appendAll(t, h, entries)

	data, err := os.ReadFile(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatalf("history does not end with a newline: %q", data[max(0, len(data)-20):])
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != len(entries) {
		t.Fatalf("history has %d lines, want %d", len(lines), len(entries))
	}
	for i, line := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%s", i+1, err, line)
		}
		var typ string
		if err := json.Unmarshal(obj["type"], &typ); err != nil || typ != entries[i].Type {
			t.Errorf("line %d: type = %s, want %q", i+1, obj["type"], entries[i].Type)
		}
		var ts time.Time
		if err := json.Unmarshal(obj["timestamp"], &ts); err != nil || !ts.Equal(entries[i].Timestamp) {
			t.Errorf("line %d: timestamp = %s, want %s", i+1, obj["timestamp"], entries[i].Timestamp.Format(time.RFC3339))
		}
	}
}

func TestHistoryTornLastLine(t *testing.T) {
	h := openTestHistory(t)
	entries := sampleEntries()
	appendAll(t, h, entries[:2])

	f, err := os.OpenFile(h.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"pla`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	got, err := h.Load()
	if err == nil || !strings.Contains(err.Error(), "[3]") || !strings.Contains(err.Error(), h.Path()) {
		t.Errorf("Load error = %v, want one naming line 3 of %s", err, h.Path())
	}
	if diff := cmp.Diff(entries[:2], got); diff != "" {
		t.Errorf("entries before the torn line (-want +got):\n%s", diff)
	}

	if err := h.Append(entries[2]); err != nil {
		t.Fatalf("Append after a torn line: %v", err)
	}
	got, err = h.Load()
	if err == nil || !strings.Contains(err.Error(), "[3]") {
		t.Errorf("Load error = %v, want the torn line 3 still reported", err)
	}
	if diff := cmp.Diff(entries[:3], got); diff != "" {
		t.Errorf("entries after appending past the torn line (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || lines[2] != `{"type":"pla` || !strings.HasPrefix(lines[3], `{"type":"revision"`) {
		t.Errorf("file lines = %q, want the torn line alone on line 3 and the revision on line 4", lines)
	}
}

func TestHistoryLoadSkipsLinesWithoutType(t *testing.T) {
	h := openTestHistory(t)
	entries := sampleEntries()
	appendAll(t, h, entries[:1])
	if err := os.WriteFile(h.Path(), append(mustRead(t, h.Path()), "{}\n\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	appendAll(t, h, entries[1:2])

	got, err := h.Load()
	if err == nil || !strings.Contains(err.Error(), "[2]") {
		t.Errorf("Load error = %v, want line 2 (an object without type) reported", err)
	}
	if diff := cmp.Diff(entries[:2], got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestHistoryLoadMissingFile(t *testing.T) {
	h := openTestHistory(t)
	got, err := h.Load()
	if err != nil || len(got) != 0 {
		t.Fatalf("Load of a missing history = %v, %v; want empty, nil", got, err)
	}
	if _, err := os.Stat(h.Path()); !os.IsNotExist(err) {
		t.Errorf("OpenHistory or Load created %s (stat error %v)", h.Path(), err)
	}
	if _, err := os.Stat(filepath.Dir(h.Path())); err != nil {
		t.Errorf("OpenHistory did not create the directory: %v", err)
	}
}

func TestLatestPlan(t *testing.T) {
	e := sampleEntries() // plan, reflection, revision, verification, replan
	plan, revision := e[0], e[2]
	reflection := e[1]
	tests := []struct {
		name    string
		entries []Entry
		want    *Plan
		wantIdx int
	}{
		{"empty", nil, nil, -1},
		{"only reflections", []Entry{reflection, reflection}, nil, -1},
		{"plan then reflection", []Entry{plan, reflection}, plan.Plan, 0},
		{"revision after plan, reflections after it", []Entry{plan, reflection, revision, reflection, e[3], e[4]}, revision.Plan, 2},
		{"fresh plan after a revision", []Entry{plan, revision, reflection, plan}, plan.Plan, 3},
		{"plan entry without a plan is skipped", []Entry{plan, {Type: EntryRevision, Timestamp: at(9)}}, plan.Plan, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, idx := LatestPlan(tt.entries)
			if got != tt.want || idx != tt.wantIdx {
				t.Errorf("LatestPlan = %p, %d; want %p, %d", got, idx, tt.want, tt.wantIdx)
			}
		})
	}
}

func TestHistoryFileNames(t *testing.T) {
	ref := func(forge, repo string, kind task.Kind, n int) task.Ref {
		return task.Ref{Forge: forge, Repo: repo, Kind: kind, Number: n}
	}
	distinct := []struct {
		name string
		a, b task.Ref
	}{
		{"slash and underscore swapped", ref(task.GitHub, "a_b/c", task.Issue, 1), ref(task.GitHub, "a/b_c", task.Issue, 1)},
		{"issue and pull request", ref(task.GitHub, "acme/app", task.Issue, 5), ref(task.GitHub, "acme/app", task.PullRequest, 5)},
		{"issue and merge request", ref(task.GitLab, "g/s/p", task.Issue, 5), ref(task.GitLab, "g/s/p", task.MergeRequest, 5)},
		{"forges", ref(task.GitHub, "acme/app", task.Issue, 5), ref(task.GitLab, "acme/app", task.Issue, 5)},
		{"numbers", ref(task.GitHub, "acme/app", task.Issue, 1), ref(task.GitHub, "acme/app", task.Issue, 11)},
		{"subgroup vs dash", ref(task.GitLab, "g/a-b", task.Issue, 1), ref(task.GitLab, "g/a/b", task.Issue, 1)},
	}
	for _, tt := range distinct {
		t.Run(tt.name, func(t *testing.T) {
			na, nb := HistoryFile(tt.a), HistoryFile(tt.b)
			if na == nb {
				t.Fatalf("HistoryFile(%s) = HistoryFile(%s) = %q", tt.a, tt.b, na)
			}
			for _, n := range []string{na, nb} {
				if strings.ContainsAny(n, `/\`) || !strings.HasSuffix(n, ".jsonl") {
					t.Errorf("file name %q is not a plain .jsonl name", n)
				}
			}
			// Both histories live side by side in one directory.
			dir := t.TempDir()
			ha, err := OpenHistory(dir, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			hb, err := OpenHistory(dir, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if err := ha.Append(Entry{Type: EntryPlan, Timestamp: at(1), Reason: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := hb.Append(Entry{Type: EntryPlan, Timestamp: at(1), Reason: "b"}); err != nil {
				t.Fatal(err)
			}
			got, err := ha.Load()
			if err != nil || len(got) != 1 || got[0].Reason != "a" {
				t.Errorf("history of %s = %+v, %v; want its own single entry", tt.a, got, err)
			}
		})
	}
	r := ref(task.GitHub, "acme/app", task.Issue, 5)
	// The same task reached another way (its CLI spelling) names the same file.
	parsed, err := task.ParseRef("github:acme/app#5")
	if err != nil || parsed != r {
		t.Fatalf("ParseRef = %+v, %v; want %+v", parsed, err, r)
	}
	if a, b := HistoryFile(r), HistoryFile(parsed); a != b {
		t.Errorf("equal refs name different files: %q and %q", a, b)
	}
	if n := HistoryFile(r); !strings.HasPrefix(n, "github_acme_app_issue_5_") {
		t.Errorf("HistoryFile(%s) = %q, want a readable prefix github_acme_app_issue_5_", r, n)
	}
}

func TestHistoryConcurrentAppends(t *testing.T) {
	h := openTestHistory(t)
	const writers, each = 8, 25
	filler := strings.Repeat("x", 8<<10) // lines larger than a pipe or page buffer
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := Entry{Type: EntryReflection, Timestamp: at(i % 60), Action: fmt.Sprintf("w%d-%d", w, i), Reason: filler}
				if err := h.Append(e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Append: %v", err)
	}

	got, err := h.Load()
	if err != nil {
		t.Fatalf("Load after concurrent appends: %v", err)
	}
	if len(got) != writers*each {
		t.Fatalf("loaded %d entries, want %d", len(got), writers*each)
	}
	seen := map[string]bool{}
	next := map[int]int{} // writer → next index expected from it
	for _, e := range got {
		if e.Reason != filler || seen[e.Action] {
			t.Fatalf("entry %q is damaged or repeated", e.Action)
		}
		seen[e.Action] = true
		var w, i int
		if _, err := fmt.Sscanf(e.Action, "w%d-%d", &w, &i); err != nil {
			t.Fatalf("entry action %q: %v", e.Action, err)
		}
		if i != next[w] {
			t.Errorf("writer %d: entry %d read back before entry %d", w, i, next[w])
		}
		next[w] = i + 1
	}
	if lines := bytes.Count(mustRead(t, h.Path()), []byte("\n")); lines != writers*each {
		t.Errorf("file has %d lines, want %d", lines, writers*each)
	}
}

func TestHistoryFileNameOfALongPathFits(t *testing.T) {
	long := task.Ref{Forge: task.GitLab, Repo: strings.Repeat("group/", 49) + "project", Kind: task.Issue, Number: 7}
	other := long
	other.Repo += "2"
	name := HistoryFile(long)
	if len(name) > 160 || name == HistoryFile(other) {
		t.Errorf("HistoryFile = %q (%d bytes); want at most 160 bytes and distinct from %q", name, len(name), HistoryFile(other))
	}
	h, err := OpenHistory(t.TempDir(), long)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Append(Entry{Type: EntryPlan}); err != nil {
		t.Errorf("append: %v", err)
	}
}
