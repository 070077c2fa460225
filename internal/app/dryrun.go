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
	"github.com/coding-agent/coding-agent/internal/workspace"
)

// dryRun makes cfg a dry run's: the store, the workspaces and the planning
// history go to a new temporary folder (a shared database or queue is never
// touched), and no task is held on the forge. Delivery stays as configured:
// the round's commit is made in the temporary checkout and shown, not
// pushed (dryForge.push), and the pull or merge request is shown, not
// opened. It returns the folder, removed when the app closes.
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
// writing it: labels, comments, edits, reactions, the commits it would push
// (push) and the changes it would open. Comments it would post get ids of
// their own, so that a later edit of one is printed too, as the lines it
// removes and adds.
type dryForge struct {
	forgeReads
	out io.Writer

	mu     sync.Mutex
	nextID int64
	bodies map[int64]string // comment id → its body as last printed
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
	d.remember(id, body)
	d.printf(ref, "would post comment %d:\n%s", -id, indentBody(body))
	now := time.Now().UTC()
	return task.Comment{ID: id, Body: body, CreatedAt: now}, nil
}

func (d *dryForge) EditComment(_ context.Context, ref task.Ref, id int64, body string) error {
	which := fmt.Sprintf("comment %d", id)
	if id < 0 {
		which = fmt.Sprintf("its comment %d", -id)
	}
	d.mu.Lock()
	prev, known := d.bodies[id]
	d.mu.Unlock()
	d.remember(id, body)
	if !known {
		d.printf(ref, "would edit %s to:\n%s", which, indentBody(body))
		return nil
	}
	lines, added, removed := lineDiff(strings.Split(strings.TrimRight(prev, "\n"), "\n"), strings.Split(strings.TrimRight(body, "\n"), "\n"))
	if added+removed == 0 {
		d.printf(ref, "would edit %s, changing nothing", which)
		return nil
	}
	d.printf(ref, "would edit %s (+%d -%d lines):\n%s", which, added, removed, strings.Join(lines, "\n"))
	return nil
}

func (d *dryForge) remember(id int64, body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bodies == nil {
		d.bodies = map[int64]string{}
	}
	d.bodies[id] = body
}

// lineDiff is the change from a to b as the lines removed ("    - ") and
// added ("    + "), in order, the lines both keep left out (a longest
// common subsequence of lines), and how many of each.
func lineDiff(a, b []string) (lines []string, added, removed int) {
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	line := func(sign, s string) string { return strings.TrimRight("    "+sign+" "+s, " ") }
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			lines, removed, i = append(lines, line("-", a[i])), removed+1, i+1
		default:
			lines, added, j = append(lines, line("+", b[j])), added+1, j+1
		}
	}
	return lines, added, removed
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
	kind := ref.Facts().Change
	if c.Draft {
		kind = "draft " + kind
	}
	d.printf(ref, "would open a %s from %s into %s: %s\n%s", kind, c.Head, c.Base, c.Title, indentBody(c.Body))
	return forge.Change{Head: c.Head, Base: c.Base, Draft: c.Draft}, nil
}

// push shows, instead of pushing them, the commits a round's delivery
// would push: the branch, whether it is new, and each commit's message and
// diffstat (workspace.Delivery.Push).
func (d *dryForge) push(ctx context.Context, ref task.Ref, w *workspace.Workspace) error {
	onForge, commits, err := w.Outgoing(ctx)
	if err != nil || commits == "" {
		return err
	}
	branch := w.Branch + " (new, from " + w.Base + ")"
	if onForge {
		branch = w.Branch
	}
	d.printf(ref, "would push the branch %s:\n%s", branch, indentBody(commits))
	return nil
}
