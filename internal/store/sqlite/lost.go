package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/coding-agent/coding-agent/internal/store"
)

// A database file removed under a running process (rm of the file or of
// state_dir, a restore copied over it) does not stop SQLite: the open
// descriptors still point at the unlinked file, every write succeeds into
// it and is gone when the process ends, and a connection the pool opens
// later makes a new empty database at the path. So the store notes which
// files it opened (the database, its write-ahead log and its shared-memory
// file, whose loss splits the processes sharing the database as surely),
// and every call compares them with what the paths name now: before the
// call, so that nothing is done on a lost database, and after a write, so
// that a write the removal overtook is not reported as kept. Three stat(2)
// calls cost a few microseconds against a transaction's hundreds.

// watched is a file of the database as the store opened it.
type watched struct {
	path string
	what string // how a message names it
	id   os.FileInfo
}

// lostError is the store's error once a file it opened is no longer at
// its path; it wraps store.ErrLost.
type lostError struct{ what, path, how string }

func (e *lostError) Error() string {
	return fmt.Sprintf("%s %s was %s while running", e.what, e.path, e.how)
}

func (e *lostError) Unwrap() error { return store.ErrLost }

// watch pins one connection for as long as the store is open, and notes
// the files it has open. SQLite removes the write-ahead log and the
// shared-memory file when the last connection to the database closes, and
// the pool may close every idle one: the log made again would read as a
// replaced one. The pinned connection reads the database first, which in
// WAL mode keeps its shared lock until it closes.
func (s *Store) watch(ctx context.Context) error {
	var files []watched
	for _, f := range []struct{ suffix, what string }{
		{"", "the state database"},
		{"-wal", "the state database's write-ahead log"},
		{"-shm", "the state database's shared-memory file"},
	} {
		path := s.path + f.suffix
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) && f.suffix != "" {
			continue // not in WAL mode: the database is all there is
		}
		if err != nil {
			return err
		}
		files = append(files, watched{path: path, what: f.what, id: fi})
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		conn.Close()
		return err
	}
	s.pin, s.files = conn, files
	return nil
}

// intact is nil while every file the store opened is at its path, and the
// store's loss (a *lostError) from the first call that finds one removed or
// replaced on: the loss is logged once, and every call after fails with it.
func (s *Store) intact() error {
	if e := s.lost.Load(); e != nil {
		return e
	}
	for _, f := range s.files {
		fi, err := os.Stat(f.path)
		how := ""
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			how = "removed"
		case err != nil:
			return fmt.Errorf("checking %s %s: %w", f.what, f.path, err)
		case !os.SameFile(fi, f.id):
			how = "replaced"
		default:
			continue
		}
		if s.lost.CompareAndSwap(nil, &lostError{what: f.what, path: f.path, how: how}) {
			s.log.Error("the state store's database is gone: nothing more is written to it", "file", f.path, "was", how)
		}
		return s.lost.Load()
	}
	return nil
}

// kept is err of a write, or the store's loss when a file went while the
// write ran: what it wrote went into a file no one will read.
func (s *Store) kept(err error) error {
	if lerr := s.intact(); lerr != nil {
		return lerr
	}
	return err
}
