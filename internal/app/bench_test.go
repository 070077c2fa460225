package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/task"
)

// BenchmarkTenTurnTask runs `run` on one GitHub issue with a scripted model
// that answers at once: nine file writes through the real filesystem MCP
// server, then done. The time is therefore the daemon's own (start-up of
// the MCP server included), not the model's. It reports the GitHub API
// requests and model requests per task and the process's peak RSS.
func BenchmarkTenTurnTask(b *testing.B) {
	var ghRequests, modelRequests int
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI,
			respond: func(e *env, r llmtest.Received) llmtest.Step {
				n := toolResults(r)
				if n < 9 {
					return e.call(r, "Writing file "+strconv.Itoa(n+1)+".", "fs/write_file", map[string]any{
						"path": filepath.Join(e.workspace, "f"+strconv.Itoa(n)+".txt"), "content": strings.Repeat("x", 1000)})
				}
				return done("Wrote nine files.")
			}})
		b.StartTimer()
		if err := e.run(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l := e.labels(); len(l) != 2 || l[1] != "coding agent done" {
			b.Fatalf("labels %v", l)
		}
		ghRequests = len(e.gh.Requests())
		modelRequests = len(e.model.Requests())
		b.StartTimer()
	}
	b.ReportMetric(float64(ghRequests), "github-requests/op")
	b.ReportMetric(float64(modelRequests), "model-requests/op")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
}

// peakRSSMiB is VmHWM of this process (Linux), 0 elsewhere.
func peakRSSMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
