package app_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/store/postgres"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// With database.url set, `run` keeps the task's state in that PostgreSQL
// database, `status` reads it from there, and the embedded store is never
// created.
func TestRunOnPostgres(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	url := pgtest.Schema(t)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true})
	e.cfg.Database.URL = url
	if err := e.run(t.Context()); err != nil {
		t.Fatalf("run: %v", err)
	}
	st, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(t.Context(), e.ref)
	if err != nil {
		t.Fatalf("the task in PostgreSQL: %v", err)
	}
	if rec.Status != task.Done || rec.Counters.LLMCalls == 0 {
		t.Errorf("record in PostgreSQL: status %s, %d LLM calls; want done with the calls counted", rec.Status, rec.Counters.LLMCalls)
	}
	var out strings.Builder
	err = app.Status(t.Context(), e.cfg, &out, app.StatusOptions{})
	if err != nil || !strings.Contains(out.String(), e.ref.String()+"  done") {
		t.Errorf("status = %v:\n%s\nwant %s done", err, out.String(), e.ref)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.StateDir, sqlite.FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the embedded store in state_dir: %v; want none with database.url set", err)
	}
}
