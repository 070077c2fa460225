package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// dryRun makes cfg a dry run's: the store, the workspaces and the planning
// history go to a new temporary folder (a shared database or queue is never
// touched), nothing is delivered, and no task is held on the forge. It returns the folder, removed when
// the app closes.
func dryRun(cfg *config.Config) (string, error) {
	dir, err := os.MkdirTemp("", "coding-agent-dry-run-")
	if err != nil {
		return "", fmt.Errorf("making the dry run's folder: %w", err)
	}
	c := *cfg
	c.StateDir = filepath.Join(dir, "data")
	c.Database = config.Database{}
	c.Queue.Type = config.QueueMemory
	// It posts nothing, its holder comment included, and is the only taker
	// it knows of (TakeLabel): no hold on the forge.
	c.ForgeLeaseSeconds = new(0)
	c.Workspace.Root = filepath.Join(dir, "workspaces")
	c.Workspace.Keep = config.KeepNever
	c.Delivery.Enabled = false
	c.Planning.History.Directory = filepath.Join(dir, "planning_history")
	*cfg = c
	return dir, nil
}

var _ forge.Forge = (*dryForge)(nil)

// removeDir closes by removing a folder.
type removeDir string

func (d removeDir) Close() error { return os.RemoveAll(string(d)) }

// forgeReads are the roles of the forge port that only read: a dry run
// passes them through. Every other method of forge.Forge is dryForge's
// own, so a write added to the port does not compile until the dry run
// says what it does with it.
type forgeReads interface {
	forge.Discoverer
	forge.Reader
	forge.Identity
	forge.Permissions
	forge.LabelHistory
	Repository(ctx context.Context, ref task.Ref) (forge.Repo, error)
	FindChange(ctx context.Context, ref task.Ref, branch string) (forge.Change, bool, error)
}

// dryForge reads from the forge and prints what it would write instead of
// writing it: labels, comments, edits, reactions and changes. Comments it
// would post get ids of their own, so that a later edit of one is printed
// too.
type dryForge struct {
	forgeReads
	out io.Writer

	mu     sync.Mutex
	nextID int64
}

func (d *dryForge) printf(ref task.Ref, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "[dry run] %s: %s\n", ref, fmt.Sprintf(format, args...))
}

func indentBody(body string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(body, "\n"), "\n", "\n    ")
}

func (d *dryForge) AddLabel(_ context.Context, ref task.Ref, label string) error {
	d.printf(ref, "would add the label %q", label)
	return nil
}

func (d *dryForge) RemoveLabel(_ context.Context, ref task.Ref, label string) error {
	d.printf(ref, "would remove the label %q", label)
	return nil
}

// TakeLabel wins the claim it would make: a dry run is the only taker it
// knows of.
func (d *dryForge) TakeLabel(_ context.Context, ref task.Ref, label string) error {
	d.printf(ref, "would take the label %q (the claim)", label)
	return nil
}

func (d *dryForge) DeleteComment(_ context.Context, ref task.Ref, id int64) error {
	d.printf(ref, "would delete comment %d", id)
	return nil
}

func (d *dryForge) PostComment(_ context.Context, ref task.Ref, body string) (task.Comment, error) {
	d.mu.Lock()
	d.nextID++
	id := -d.nextID // never a forge's id
	d.mu.Unlock()
	d.printf(ref, "would post comment %d:\n%s", -id, indentBody(body))
	now := time.Now().UTC()
	return task.Comment{ID: id, Body: body, CreatedAt: now}, nil
}

func (d *dryForge) EditComment(_ context.Context, ref task.Ref, id int64, body string) error {
	which := fmt.Sprintf("comment %d", id)
	if id < 0 {
		which = fmt.Sprintf("its comment %d", -id)
	}
	d.printf(ref, "would edit %s to:\n%s", which, indentBody(body))
	return nil
}

func (d *dryForge) React(_ context.Context, ref task.Ref, commentID int64, emoji string) error {
	d.printf(ref, "would react %q to comment %d", emoji, commentID)
	return nil
}

func (d *dryForge) EditChange(_ context.Context, ref task.Ref, number int, body string) error {
	d.printf(ref, "would edit the description of change %d to:\n%s", number, indentBody(body))
	return nil
}

func (d *dryForge) OpenChange(_ context.Context, ref task.Ref, c forge.NewChange) (forge.Change, error) {
	d.printf(ref, "would open a change from %s into %s: %s", c.Head, c.Base, c.Title)
	return forge.Change{Head: c.Head, Base: c.Base, Draft: c.Draft}, nil
}
