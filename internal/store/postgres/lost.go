package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coding-agent/coding-agent/internal/store"
)

// SQLSTATEs of a database whose objects are gone: undefined_table (the
// schema the URL's search_path names was dropped, and its tables with it),
// invalid_schema_name, and invalid_catalog_name (the database itself was
// dropped: every new connection is refused with it).
var goneCodes = map[string]bool{"42P01": true, "3F000": true, "3D000": true}

// lost makes an error that says the store's tables, schema or database are
// gone a store.ErrLost that says so: the migrations ran when the store was
// opened, so nothing but a drop under the running process takes them away,
// and they do not come back. Any other error is returned as it is.
func lost(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && goneCodes[pe.Code] {
		return &lostError{err: err}
	}
	return err
}

type lostError struct{ err error }

func (e *lostError) Error() string {
	return "the state database's tables are gone (was its schema or database dropped?): " + e.err.Error()
}

func (e *lostError) Unwrap() []error { return []error{e.err, store.ErrLost} }
