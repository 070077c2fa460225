package app_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/app"
	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/sqlite"
	"github.com/coding-agent/coding-agent/internal/task"
)

// `run` whose state database is deleted while it works (here when the model
// is first asked) stops at its next write to the store (the model's usage,
// right after the answer): it exits 1 naming the file and saying it was
// removed, the task says in a comment that the database is gone instead of
// being closed as if its state were kept, and no step after it runs. It used to finish the task, exit 0 and say nothing,
// its state written into the unlinked file.
func TestRemovedDatabaseStopsRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	var db string
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				if err := os.Remove(db); err != nil {
					t.Errorf("removing the database: %v", err)
				}
			}
			return writeThenDone(e, r)
		}})
	db = filepath.Join(e.cfg.StateDir, sqlite.FileName)
	code, stderr := runProcess(t, e, "run")
	if code != 1 {
		t.Fatalf("run exited %d, want 1\n%s", code, stderr)
	}
	want := "the state database " + db + " was removed while running"
	if !strings.HasPrefix(stderr, "coding-agent run: ") || !strings.Contains(stderr, "state store: ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr)
	}
	if c := e.botComments(); len(c) != 1 || !strings.Contains(c[0], "its state database is gone") || !strings.Contains(c[0], want) {
		t.Errorf("bot comments %q, want one saying the state database is gone and which", c)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1: nothing after the store was lost", n)
	}
	e.wantLabels(t, "bug", "coding agent processing")
}

// `serve` whose state database is deleted while it waits for work stops at
// its next pass: it returns the store's loss (exit 1) instead of logging a
// failed pass at every tick for ever.
func TestRemovedDatabaseStopsServe(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true})
	e.gh.RemoveLabelDirect(e.ref.Repo, e.ref.Number, "coding agent") // nothing to do: serve waits
	a, err := app.New(t.Context(), e.cfg, app.Options{Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.RemoveAll(e.cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), exitBound)
	defer cancel()
	err = a.Serve(ctx)
	if !errors.Is(err, store.ErrLost) || ctx.Err() != nil {
		t.Fatalf("Serve = %v (context: %v), want the store's loss before the deadline", err, ctx.Err())
	}
	if want := filepath.Join(e.cfg.StateDir, sqlite.FileName) + " was removed while running"; !strings.Contains(err.Error(), want) {
		t.Errorf("Serve = %v, want it to say %q", err, want)
	}
}

// With the store in PostgreSQL, a schema dropped while `run` works fails
// it the same way: an error that says the tables are gone.
func TestDroppedSchemaStopsRun(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	dbURL := pgtest.Schema(t)
	schema := schemaOf(t, dbURL)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI, native: true,
		respond: func(e *env, r llmtest.Received) llmtest.Step {
			if r.N == 1 {
				if err := pgtest.Drop(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Errorf("dropping the schema: %v", err)
				}
			}
			return writeThenDone(e, r)
		}})
	e.cfg.Database.URL = dbURL
	err := e.run(t.Context())
	if !errors.Is(err, store.ErrLost) || !strings.Contains(err.Error(), "the state database's tables are gone (was its schema or database dropped?)") {
		t.Fatalf("run = %v, want the store's loss", err)
	}
	if c := e.botComments(); len(c) != 1 || !strings.Contains(c[0], "its state database is gone") {
		t.Errorf("bot comments %q, want one saying the state database is gone", c)
	}
}

func schemaOf(t *testing.T, storeURL string) string {
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("search_path")
}

// runProcess runs `coding-agent command` on e's config and returns its exit
// code and stderr; a process still running after exitBound is killed and
// the test fails.
func runProcess(t *testing.T, e *env, command string) (int, string) {
	t.Helper()
	return runArgs(t, e, command, buildBinary(t), command, "--config", writeConfig(t, e.cfg))
}

// runArgs runs argv, the command named command, with e's secrets in its
// environment, and returns its exit code and stderr; a process still
// running after exitBound is killed and the test fails.
func runArgs(t *testing.T, e *env, command string, argv ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CA_TEST_TOKEN="+e.gh.Token, "CA_TEST_KEY="+apiKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(exitBound, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("%s was still running after %s\n%s", command, exitBound, stderr.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return 0, stderr.String()
}
