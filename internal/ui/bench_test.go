package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// longTask is the seeded store with its done task made long: 1,000 model
// requests, each with a tool call whose result is 4 KB.
func longTask(b *testing.B) *Handler {
	s := seeded(b)
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 7}
	for i := range 1000 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := s.AddEvent(b.Context(), ref, store.Event{At: at, Kind: store.EventRequest, Title: "Reading a file.", TokensIn: 4000 + i, TokensOut: 50, Millis: 900}); err != nil {
			b.Fatal(err)
		}
		if err := s.AddEvent(b.Context(), ref, store.Event{At: at, Kind: store.EventCall, Title: "fs/read_file", Args: `{"path":"a.go"}`,
			Text: strings.Repeat("line of code\n", 315)}); err != nil {
			b.Fatal(err)
		}
	}
	h, err := New(Options{Store: s, Token: token})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkTaskPage renders the long task's page, read from SQLite.
func BenchmarkTaskPage(b *testing.B) { benchPage(b, longTask(b), "/tasks/github/acme/app/7") }

// BenchmarkTaskList renders the list, the long task among its rows.
func BenchmarkTaskList(b *testing.B) { benchPage(b, longTask(b), "/tasks") }

func benchPage(b *testing.B, h *Handler, path string) {
	b.ReportAllocs()
	var size int
	for b.Loop() {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d", w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size)/1e6, "MB/page")
}
