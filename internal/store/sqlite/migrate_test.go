package sqlite

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// conversationsVersion is the schema version that added the conversations
// table.
const conversationsVersion = 2

func schemaVersion(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.db.QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&v); err != nil {
		t.Fatalf("reading user_version: %v", err)
	}
	return v
}

func hasTable(t *testing.T, s *Store, name string) bool {
	t.Helper()
	var n int
	err := s.db.QueryRowContext(t.Context(),
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, name).Scan(&n)
	if err != nil {
		t.Fatalf("looking up table %s: %v", name, err)
	}
	return n == 1
}

// TestUpgradeFromOlderSchema builds a database as every older release left it
// (only the migrations it knew, and their user_version), with a task and a
// checkpoint in it, and opens it with the current code: the schema is brought
// up to date and the data survives.
func TestUpgradeFromOlderSchema(t *testing.T) {
	if len(migrations) < conversationsVersion {
		t.Fatalf("%d migrations, want at least %d", len(migrations), conversationsVersion)
	}
	for v := 1; v < len(migrations); v++ {
		t.Run("from version "+strconv.Itoa(v), func(t *testing.T) {
			testUpgradeFrom(t, v)
		})
	}
}

func testUpgradeFrom(t *testing.T, version int) {
	ctx, dir, ref := t.Context(), t.TempDir(), storetest.Ref(1)
	old, err := openSchema(ctx, dir, Options{}, migrations[:version])
	if err != nil {
		t.Fatalf("creating a version %d database: %v", version, err)
	}
	if got := schemaVersion(t, old); got != version {
		t.Fatalf("old database at user_version %d, want %d", got, version)
	}
	if version < conversationsVersion && hasTable(t, old, "conversations") {
		t.Fatalf("version %d database already has the conversations table", version)
	}
	// The row as the first version wrote it: running, held by host and
	// PID (no lease).
	owner := storetest.LiveOwner(t, "m")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := old.db.ExecContext(ctx, `INSERT INTO tasks
		(ref, forge, repo, kind, number, status, host, pid, provider, model, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)`,
		ref.String(), ref.Forge, ref.Repo, string(ref.Kind), ref.Number, owner.Host, owner.PID,
		owner.Provider, owner.Model, formatTime(at), formatTime(at)); err != nil {
		t.Fatalf("writing a task in the old database: %v", err)
	}
	rec := store.Record{Ref: ref, Status: task.Running, Host: owner.Host, PID: owner.PID,
		Provider: owner.Provider, Model: owner.Model, CreatedAt: at, UpdatedAt: at}
	cp := store.Checkpoint{Step: 4, Data: []byte("old state"), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	if _, err := old.db.ExecContext(ctx, `INSERT INTO checkpoints (ref, step, data, created_at) VALUES (?, ?, ?, ?)`,
		ref.String(), cp.Step, cp.Data, formatTime(cp.CreatedAt)); err != nil {
		t.Fatalf("writing a checkpoint in the old database: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := mustOpen(t, dir, Options{})
	if got := schemaVersion(t, s); got != len(migrations) {
		t.Errorf("upgraded user_version = %d, want %d", got, len(migrations))
	}
	if !hasTable(t, s, "conversations") {
		t.Fatal("upgraded database has no conversations table")
	}
	if got, err := s.Get(ctx, ref); err != nil || !cmp.Equal(rec, got) {
		t.Errorf("task after upgrade = %+v, %v; want %+v", got, err, rec)
	}
	if got, ok, err := s.LoadCheckpoint(ctx, ref); err != nil || !ok || !cmp.Equal(cp, got) {
		t.Errorf("checkpoint after upgrade = %+v, %v, %v; want %+v", got, ok, err, cp)
	}
	if _, ok, err := s.LoadConversation(ctx, ref); err != nil || ok {
		t.Errorf("LoadConversation of an upgraded task: ok=%v err=%v, want none", ok, err)
	}
	conv := store.Conversation{Round: 1, Mark: 5, Since: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC),
		Summaries: []string{"after upgrade"}}
	if err := s.SaveConversation(ctx, ref, conv); err != nil {
		t.Fatalf("SaveConversation after upgrade: %v", err)
	}
	if got, ok, err := s.LoadConversation(ctx, ref); err != nil || !ok || !cmp.Equal(conv, got) {
		t.Errorf("conversation after upgrade = %+v, %v, %v; want %+v", got, ok, err, conv)
	}
	// A row an older version left running has no lease: any process may
	// take it over.
	if _, err := s.TakeOver(ctx, ref, storetest.LiveOwner(t, "new")); err != nil {
		t.Errorf("taking over a task an older version left running: %v", err)
	}
}

// TestConversationCascade checks the foreign key: a task's conversation goes
// with its row, and the table refuses a conversation for no task.
func TestConversationCascade(t *testing.T) {
	ctx := t.Context()
	s := mustOpen(t, t.TempDir(), Options{})
	ref, keep := storetest.Ref(1), storetest.Ref(2)
	for _, r := range []task.Ref{ref, keep} {
		if _, err := s.Claim(ctx, r, storetest.LiveOwner(t, "m")); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveConversation(ctx, r, store.Conversation{Round: 1, Summaries: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE ref = ?`, ref.String()); err != nil {
		t.Fatalf("deleting a task: %v", err)
	}
	if n := countConversations(t, s, ref); n != 0 {
		t.Errorf("%d conversation rows left after deleting their task, want 0", n)
	}
	if n := countConversations(t, s, keep); n != 1 {
		t.Errorf("%d conversation rows for the other task, want 1", n)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO conversations (ref, round, mark, since, summaries)
		VALUES ('github:nobody/none#1', 0, 0, '', '[]')`)
	if err == nil {
		t.Error("inserting a conversation for no task succeeded")
	}
}

func countConversations(t *testing.T, s *Store, ref task.Ref) int {
	t.Helper()
	var n int
	err := s.db.QueryRowContext(t.Context(), `SELECT count(*) FROM conversations WHERE ref = ?`, ref.String()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
