package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/task"
)

// longTask is a task of turns model requests, each reading an 8 KB file of
// its own through the real filesystem server, in a 16,384-token window. The
// scripted server counts every request with OpenAI's tokenizer and reports
// that as the usage; with refuseOver > 0 it answers OpenAI's 400
// context_length_exceeded to a longer request.
type longTask struct {
	turns, refuseOver int
	counter           llm.Counter

	mu        sync.Mutex
	counted   map[string]int // tokens of each message text seen: most come again in every later request
	sizes     []int          // tokens of each answered request
	bytes     []int
	refused   int
	summaries int
	issued    int // files the model has asked to read
	dupes     []string
}

const (
	longContext = 16384
	longReserve = 2048
)

func fileText(i int) string {
	line := fmt.Sprintf("file %03d holds this line of notes about the widget; ", i)
	return strings.Repeat(line, 8192/len(line)+1)
}

func (lt *longTask) env(t testing.TB, provider string) *env {
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: provider, respond: lt.respond})
	for i := 1; i <= lt.turns; i++ {
		if err := os.WriteFile(filepath.Join(e.workspace, fmt.Sprintf("f%03d.txt", i)), []byte(fileText(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	switch provider {
	case config.ProviderOpenAI:
		e.cfg.LLM.OpenAI.Model, e.cfg.LLM.OpenAI.ContextLength, e.cfg.LLM.OpenAI.MaxToken = "gpt-4o-test", longContext, longReserve
	case config.ProviderOllama:
		e.cfg.LLM.Ollama.ContextLength, e.cfg.LLM.Ollama.MaxToken = longContext, longReserve
	}
	e.cfg.Planning.Enabled = false
	return e
}

func (lt *longTask) respond(e *env, r llmtest.Received) llmtest.Step {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	n, b := 0, 0
	var all strings.Builder
	if lt.counted == nil {
		lt.counted = map[string]int{}
	}
	for _, m := range r.Messages {
		c, ok := lt.counted[m.Content]
		if !ok {
			c = lt.counter.Count(m.Content)
			lt.counted[m.Content] = c
		}
		n += 4 + c
		b += len(m.Content)
		all.WriteString(m.Content)
	}
	if lt.refuseOver > 0 && n > lt.refuseOver {
		lt.refused++
		return llmtest.Fault{Status: 400, Body: `{"error":{"message":"This model's maximum context length is ` + fmt.Sprint(lt.refuseOver) +
			` tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}
	}
	lt.sizes, lt.bytes = append(lt.sizes, n), append(lt.bytes, b)
	for i := 1; i <= lt.issued; i++ { // the files not yet read are in no request
		if strings.Count(all.String(), fileText(i)) > 1 {
			lt.dupes = append(lt.dupes, fmt.Sprintf("request %d carries file %d twice", r.N, i))
		}
	}
	usage := llmtest.Usage{In: n, Out: 30}
	if r.Messages[0].Content == "You summarise a coding agent's work for the agent itself." {
		lt.summaries++
		return llmtest.Reply{Content: "I read many files of widget notes, one per step.", Usage: usage}
	}
	if lt.issued >= lt.turns {
		return llmtest.Reply{Content: `{"done": true, "comment": "Read every file."}`, Usage: usage}
	}
	lt.issued++ // the model remembers what it read, whatever was compacted
	step := e.call(r, "", "fs/read_text_file", map[string]any{"path": filepath.Join(e.workspace, fmt.Sprintf("f%03d.txt", lt.issued))})
	if rep, ok := step.(llmtest.Reply); ok {
		rep.Usage = usage
		return rep
	}
	return step
}

// A 200-turn task with 8 KB tool results in a 16,384-token window finishes
// on the OpenAI wire and the Ollama wire with every request under the
// budget by the tokenizer and by the usage the server reports, and no
// request carrying a tool output twice. The test command runs 60 turns
// (the window fills after five, and is summarised again and again), 200
// with CODING_AGENT_TEST_FULL: 47 s of CPU under -race, the package's
// largest share.
func TestLongTaskFitsItsWindow(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	turns := stress(60, 200)
	if testing.Short() {
		t.Skipf("%d turns", turns)
	}
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			lt := &longTask{turns: turns, counter: tokens.ForModel("gpt-4o")}
			e := lt.env(t, provider)
			e.runOK(t)
			e.wantLabels(t, "bug", "coding agent done")
			lt.check(t)
		})
	}
}

func (lt *longTask) check(t *testing.T) {
	t.Helper()
	limit := longContext - longReserve
	for i, n := range lt.sizes {
		if n > limit {
			t.Errorf("request %d holds %d tokens, over the budget of %d", i+1, n, limit)
		}
	}
	for _, d := range lt.dupes {
		t.Error(d)
	}
	if lt.summaries == 0 {
		t.Error("no summary was written: the window never filled")
	}
}

// A server that counts more than the engine and refuses a request over its
// own limit with OpenAI's 400 context_length_exceeded: the task recovers.
func TestContextLengthExceededOnTheWire(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	lt := &longTask{turns: 30, counter: tokens.ForModel("gpt-4o"), refuseOver: 9000}
	e := lt.env(t, config.ProviderOpenAI)
	e.runOK(t)
	e.wantLabels(t, "bug", "coding agent done")
	if lt.refused == 0 {
		t.Fatal("the server never refused a request: the test proves nothing")
	}
}

// BenchmarkLongTask runs the task on the OpenAI wire with 50 and 200 turns
// and reports the largest request in tokens, the bytes sent in all and the
// CPU time per turn: flat CPU per turn and bytes growing with the turns,
// not with their square, is what the budget buys.
func BenchmarkLongTask(b *testing.B) {
	for _, turns := range []int{50, 200} {
		b.Run(fmt.Sprint("turns=", turns), func(b *testing.B) {
			var maxTokens, total, requests int
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				lt := &longTask{turns: turns, counter: tokens.ForModel("gpt-4o")}
				e := lt.env(b, config.ProviderOpenAI)
				before := cpuTime()
				b.StartTimer()
				if err := e.run(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - before
				for i, n := range lt.sizes {
					maxTokens, total = max(maxTokens, n), total+lt.bytes[i]
				}
				requests += len(lt.sizes)
				b.StartTimer()
			}
			b.ReportMetric(float64(maxTokens), "max-request-tokens")
			b.ReportMetric(float64(total)/float64(b.N)/1e6, "MB-sent/op")
			b.ReportMetric(float64(cpu.Microseconds())/float64(requests)/1000, "cpu-ms/turn")
		})
	}
}

// cpuTime is this process's user and system CPU time (the emulators and
// the scripted server included; the MCP server is another process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A catalog that cannot fit the context window stops `run` before any task
// is claimed: the error names the server and the fix, and the task keeps
// its bot label.
func TestRunRefusesACatalogThatCannotFit(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	e := newEnv(t, setup{forge: task.GitHub, kind: task.Issue, provider: config.ProviderOpenAI})
	e.cfg.LLM.OpenAI.ContextLength, e.cfg.LLM.OpenAI.MaxToken = 4096, 1024
	e.cfg.MCPServers[0].SystemPrompt = strings.Repeat("Describe every file you touch, with its size, owner and purpose. ", 80)
	err := e.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "fs (3 tools)") || !strings.Contains(err.Error(), "context_length 4096") {
		t.Fatalf("run: %v, want the catalog refused", err)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests", n)
	}
	e.wantLabels(t, "bug", "coding agent")
}
