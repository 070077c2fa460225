package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/task"
)

// What a commit changes, as the message writer and a change's description
// read it: each file's status (a rename found as such, with its old path),
// its line counts, a binary file as binary; and the range's commits and
// the newest one's subject.
func TestFilesSaysWhatEachFileDid(t *testing.T) {
	u := newUpstream(t, map[string]string{"src/a.go": "package a\n", "old.txt": "one\ntwo\nthree\nfour\nfive\n", "gone.txt": "x\n"})
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 3}
	w := prepare(t, newManager(t, Options{}), issueSpec(u, ref))
	ctx := context.Background()
	fork, err := w.ForkPoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, w.Dir, "src/a.go", "package a\n\nfunc A() {}\n")
	if err := os.Rename(filepath.Join(w.Dir, "old.txt"), filepath.Join(w.Dir, "new.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.Dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, w.Dir, "logo.png", "\x89PNG\x00\x01\x02")
	want := []report.FileChange{
		{Path: "gone.txt", Status: report.FileDeleted, Deleted: 1},
		{Path: "logo.png", Status: report.FileAdded, Binary: true},
		{Path: "new.txt", From: "old.txt", Status: report.FileRenamed},
		{Path: "src/a.go", Status: report.FileModified, Added: 2},
	}
	var staged []report.FileChange
	sha, err := w.CommitWith(ctx, func(s []report.FileChange) (string, error) { staged = s; return "Change four files", nil })
	if err != nil || sha == "" {
		t.Fatalf("CommitWith = %q, %v", sha, err)
	}
	if diff := cmp.Diff(want, staged); diff != "" {
		t.Errorf("staged (-want +got):\n%s", diff)
	}
	got, err := w.Files(ctx, fork, sha)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files from the fork point (-want +got):\n%s", diff)
	}
	if cs, err := w.Commits(ctx, fork, sha); err != nil || len(cs) != 1 || len(cs[0]) < 7 || sha[:len(cs[0])] != cs[0] {
		t.Errorf("commits %v, %v; want %s alone", cs, err, sha)
	}
	if s, err := w.Subject(ctx, sha); err != nil || s != "Change four files" {
		t.Errorf("subject %q, %v", s, err)
	}
	if !w.IsAncestor(ctx, fork, sha) || w.IsAncestor(ctx, sha, fork) || w.IsAncestor(ctx, "0123456789abcdef0123456789abcdef01234567", sha) {
		t.Error("IsAncestor is wrong")
	}
}
