package task_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/task"
)

func TestParseRefRoundTrip(t *testing.T) {
	tests := []struct {
		in   string
		want task.Ref
	}{
		{"github:acme/app#12", task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 12}},
		{"github:acme/app!13", task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: 13}},
		{"gitlab:group/app#3", task.Ref{Forge: task.GitLab, Repo: "group/app", Kind: task.Issue, Number: 3}},
		{"gitlab:group/app!7", task.Ref{Forge: task.GitLab, Repo: "group/app", Kind: task.MergeRequest, Number: 7}},
		{"gitlab:grp/sub/app!7", task.Ref{Forge: task.GitLab, Repo: "grp/sub/app", Kind: task.MergeRequest, Number: 7}},
		{"gitlab:a/b/c/d#100200", task.Ref{Forge: task.GitLab, Repo: "a/b/c/d", Kind: task.Issue, Number: 100200}},
		{"github:my-org/my.repo_2#1", task.Ref{Forge: task.GitHub, Repo: "my-org/my.repo_2", Kind: task.Issue, Number: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := task.ParseRef(tt.in)
			if err != nil {
				t.Fatalf("ParseRef(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseRef(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("ParseRef(%q).String() = %q, want it back unchanged", tt.in, s)
			}
		})
	}
}

func TestRefStringSeparators(t *testing.T) {
	tests := []struct {
		ref  task.Ref
		want string
	}{
		{task.Ref{Forge: task.GitHub, Repo: "o/r", Kind: task.Issue, Number: 1}, "github:o/r#1"},
		{task.Ref{Forge: task.GitHub, Repo: "o/r", Kind: task.PullRequest, Number: 2}, "github:o/r!2"},
		{task.Ref{Forge: task.GitLab, Repo: "g/p", Kind: task.Issue, Number: 3}, "gitlab:g/p#3"},
		{task.Ref{Forge: task.GitLab, Repo: "g/s/p", Kind: task.MergeRequest, Number: 4}, "gitlab:g/s/p!4"},
	}
	for _, tt := range tests {
		if got := tt.ref.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

func TestParseRefErrors(t *testing.T) {
	tests := []struct {
		name, in, wantInErr string
	}{
		{"no forge", "acme/app#12", "want github:owner/repo#N"},
		{"unknown forge", "bitbucket:acme/app#12", "want github:owner/repo#N"},
		{"forge in capitals", "GitHub:acme/app#12", "want github:owner/repo#N"},
		{"empty", "", "want github:owner/repo#N"},
		{"missing number", "github:acme/app", "missing #number or !number"},
		{"separator first", "github:#12", "missing #number or !number"},
		{"empty number", "github:acme/app#", "not a positive number"},
		{"zero", "github:acme/app#0", "not a positive number"},
		{"negative", "github:acme/app#-3", "not a positive number"},
		{"signed", "github:acme/app#+3", "not a positive number"},
		{"leading zero", "gitlab:g/p!07", "not a positive number"},
		{"non-numeric", "github:acme/app#twelve", "not a positive number"},
		{"number with suffix", "gitlab:g/p!7a", "not a positive number"},
		{"number with space", "github:acme/app# 7", "not a positive number"},
		{"too large", "github:acme/app#99999999999999999999", "not a positive number"},
		{"repo without slash", "github:acme#12", "must be owner/name"},
		{"gitlab project without group", "gitlab:app!7", "must be group/project"},
		{"github nested path", "github:acme/app/sub#12", "must be owner/name"},
		{"empty owner", "github:/app#12", "must be owner/name"},
		{"empty name", "github:acme/#12", "must be owner/name"},
		{"empty gitlab segment", "gitlab:grp//app!7", "must be group/project"},
		{"two separators", "github:acme/app#1#2", "must be owner/name"},
		{"space in repo", "github:acme/my app#2", "must be owner/name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := task.ParseRef(tt.in)
			if err == nil {
				t.Fatalf("ParseRef(%q) = %+v, want an error", tt.in, ref)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("ParseRef(%q) error %q does not say %q", tt.in, err, tt.wantInErr)
			}
			if ref != (task.Ref{}) {
				t.Errorf("ParseRef(%q) returned %+v with its error, want the zero Ref", tt.in, ref)
			}
		})
	}
}

func TestHasLabel(t *testing.T) {
	tk := task.Task{Labels: []string{"bug", "coding agent processing", "Coding Agent"}}
	tests := []struct {
		label string
		want  bool
	}{
		{"bug", true},
		{"coding agent processing", true},
		{"Coding Agent", true},
		{"coding agent", false}, // only a prefix of one label, another differs in case
		{"Bug", false},
		{"bug ", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := tk.HasLabel(tt.label); got != tt.want {
			t.Errorf("HasLabel(%q) = %v, want %v", tt.label, got, tt.want)
		}
	}
	if (task.Task{}).HasLabel("bug") {
		t.Error("a task without labels reports HasLabel(\"bug\") = true")
	}
}

func TestStatusFinal(t *testing.T) {
	want := map[task.Status]bool{
		task.Queued:   false,
		task.Running:  false,
		task.Paused:   false,
		task.Awaiting: false,
		task.Stopped:  true,
		task.Done:     true,
		task.Failed:   true,
		"":            false,
		"unknown":     false,
	}
	for s, final := range want {
		if got := s.Final(); got != final {
			t.Errorf("Status(%q).Final() = %v, want %v", s, got, final)
		}
	}
}

// A reference in text is the forge's own: GitHub writes its pull requests
// with '#' like its issues; only GitLab's merge requests take '!'.
func TestMentionIsTheForgesNotation(t *testing.T) {
	for _, c := range []struct {
		ref        task.Ref
		short, all string
	}{
		{task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 12}, "#12", "acme/app#12"},
		{task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.PullRequest, Number: 2}, "#2", "acme/app#2"},
		{task.Ref{Forge: task.GitLab, Repo: "g/sub/app", Kind: task.Issue, Number: 3}, "#3", "g/sub/app#3"},
		{task.Ref{Forge: task.GitLab, Repo: "g/app", Kind: task.MergeRequest, Number: 7}, "!7", "g/app!7"},
	} {
		if got := c.ref.Mention(); got != c.short {
			t.Errorf("%s.Mention() = %q, want %q", c.ref, got, c.short)
		}
		if got := c.ref.FullMention(); got != c.all {
			t.Errorf("%s.FullMention() = %q, want %q", c.ref, got, c.all)
		}
	}
}
