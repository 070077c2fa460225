package postgres

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/store/postgres/pgtest"
	"github.com/coding-agent/coding-agent/internal/store/storetest"
)

// A schema or a whole database dropped under the open store makes every
// call fail with store.ErrLost and a message that says the database's
// tables are gone and asks whether it was dropped, a failure of the store
// once marked: the command stops instead of retrying a database that will
// not come back. (Before, every call failed too, with PostgreSQL's own
// words: the command stopped, but serve kept polling a database gone.)
func TestDroppedDatabaseIsLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		open func(t testing.TB) string           // the store's URL
		drop func(t *testing.T, storeURL string) // what another process does
	}{
		{"schema", pgtest.Schema, func(t *testing.T, storeURL string) {
			u, _ := url.Parse(storeURL)
			if err := pgtest.Drop(t.Context(), "DROP SCHEMA "+u.Query().Get("search_path")+" CASCADE"); err != nil {
				t.Fatal(err)
			}
		}},
		{"database", pgtest.Database, func(t *testing.T, storeURL string) {
			u, _ := url.Parse(storeURL)
			if err := pgtest.Drop(t.Context(), "DROP DATABASE "+strings.TrimPrefix(u.Path, "/")+" WITH (FORCE)"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := c.open(t)
			s := mustOpen(t, u, Options{})
			ref := storetest.Ref(1)
			o := storetest.LiveOwner(t, "m")
			if _, err := s.Claim(t.Context(), ref, o); err != nil {
				t.Fatal(err)
			}
			c.drop(t, u)
			// A dropped database's connections were cut by the server
			// (terminated by an administrator, as a restart does): the
			// first call may fail so; the pool's new connections are
			// refused for the database that is gone.
			_, _ = s.Get(t.Context(), ref)
			for name, err := range storetest.EveryCall(t.Context(), store.MarkFailures(s), ref, o) {
				if !errors.Is(err, store.ErrLost) || !store.IsFailure(err) ||
					!strings.Contains(err.Error(), "the state database's tables are gone (was its schema or database dropped?)") {
					t.Errorf("%s after the %s was dropped: %v; want a failure saying the tables are gone", name, c.name, err)
				}
			}
		})
	}
}
