package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BenchmarkPrepare measures the time to prepare a workspace for a small
// repository (a README and 20 source files) and a 50 MiB one (random data,
// which git cannot compress): a first clone, and the reuse of a later round
// (ls-remote, nothing to fetch), over smart HTTP with the token in the
// environment (the emulator's git http-backend on loopback) and from a
// local path (file://, git alone).
//
//	go test -run XXX -bench Prepare -benchtime 5x ./internal/workspace/
func BenchmarkPrepare(b *testing.B) {
	srv := forgetest.NewGitServer(b)
	srv.InitRepo("acme/small")
	for i := range 20 {
		srv.CommitFile("acme/small", "main", fmt.Sprintf("src/f%02d.go", i), fmt.Sprintf("package src\n\nconst F%02d = %d\n", i, i), "add a file")
	}
	srv.InitRepo("acme/large")
	srv.CommitRandom("acme/large", "main", 50)
	for _, name := range []string{"acme/small", "acme/large"} {
		// As a forge keeps them: packed, each object tried once for deltas.
		gitT(b, srv.GitDir(name), "repack", "-adq")
	}
	ref := task.Ref{Forge: task.GitHub, Repo: "acme/app", Kind: task.Issue, Number: 1}
	for _, repo := range []string{"small", "large"} {
		name := "acme/" + repo
		size := float64(treeBytes(b, srv.GitDir(name))) / 1e6
		for _, tr := range [][2]string{{"http", srv.RepoURL(name)}, {"file", "file://" + srv.GitDir(name)}} {
			transport, url := tr[0], tr[1]
			s := Spec{Ref: ref, CloneURL: url, Auth: Static(basic("x-access-token", srv.Token)), Base: "main", Branch: "coding-agent/issue-1"}
			b.Run(repo+"/"+transport+"/clone", func(b *testing.B) {
				m := newManager(b, Options{})
				for range b.N {
					b.StopTimer()
					if err := m.Remove(context.Background(), ref); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					prepare(b, m, s)
				}
				b.ReportMetric(size, "MB-repo")
			})
			b.Run(repo+"/"+transport+"/reuse", func(b *testing.B) {
				m := newManager(b, Options{})
				prepare(b, m, s)
				b.ResetTimer()
				for range b.N {
					prepare(b, m, s)
				}
				b.ReportMetric(size, "MB-repo")
			})
		}
	}
}

// treeBytes is the size of the files below dir.
func treeBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
