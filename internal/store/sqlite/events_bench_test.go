package sqlite

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BenchmarkAddEvent is what recording one step costs a run: a tool call's
// event with a 4 KB result.
func BenchmarkAddEvent(b *testing.B) {
	s, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}
	if _, err := s.Claim(b.Context(), ref, store.Owner{Host: "h", PID: 1, Instance: "i"}); err != nil {
		b.Fatal(err)
	}
	e := store.Event{Kind: store.EventCall, Title: "fs/read_file", Args: `{"path":"main.go"}`, Text: strings.Repeat("x", 4096)}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AddEvent(b.Context(), ref, e); err != nil {
			b.Fatal(err)
		}
	}
}
