package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/agent"
	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/llmtest"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/plan"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
)

// A catalog offered in part keeps its word: a tool a search says is in the
// tool list is in the next request, what it says left the list is not,
// and nothing else changes; no request passes the budget.

// rig is one way of running the catalog tests: the wire, native calls or
// the JSON protocol, the window, the loop.
type rig struct {
	wire   string
	native bool
	window int
	loop   string
}

func (g rig) String() string {
	mode := "json"
	if g.native {
		mode = "native"
	}
	return fmt.Sprintf("%s/%s/%dk/%s", g.wire, mode, g.window/1024, g.loop)
}

// budget is the app's for the window: a reply reserve of a quarter of it,
// at most 4096, OpenAI's tokenizer.
func (g rig) budget() engine.Budget {
	return engine.Budget{ContextLength: g.window, Reserve: min(g.window/4, 4096), Counter: tokens.ForModel("gpt-4o")}
}

// engine is the engine of the rig for m and the catalog of host; OpenAI's
// wire with its limit of 128 tools a request.
func (g rig) engine(t *testing.T, w *world, m llm.Client, host engine.Tools) *engine.Engine {
	t.Helper()
	maxTools := 0
	if g.wire == llmtest.WireOpenAI {
		maxTools = 128
	}
	e, err := engine.New(engine.Options{LLM: m, Tools: host, State: w, FunctionCalling: g.native, MaxTools: maxTools,
		Budget: g.budget(), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// run runs the task on w through m, with the catalog of host.
func (g rig) run(t *testing.T, w *world, m llm.Client, host engine.Tools, tk task.Task) (engine.Outcome, error) {
	t.Helper()
	return g.runOn(t, g.engine(t, w, m, host), w, tk)
}

// runOn runs the task on w with engine e.
func (g rig) runOn(t *testing.T, e *engine.Engine, w *world, tk task.Task) (engine.Outcome, error) {
	t.Helper()
	tk.Ref, tk.Author = ref, "alice"
	in := engine.Input{Task: tk, Post: w}
	if g.loop == "plain" {
		l, err := agent.New(e, agent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Run(t.Context(), in)
	}
	c, err := plan.New(plan.Options{Engine: e, Forge: w, Lang: report.English, Settings: plan.Settings{
		MaxSubtasks: 10, DecompositionLevel: "moderate", MaxCallsPerAction: 10, MaxAttempts: 2,
		MaxRevisions: 1, Verification: true, MaxVerifyRounds: 1, MaxReplans: 1, HistoryDir: w.history}})
	if err != nil {
		t.Fatal(err)
	}
	return c.Run(t.Context(), in)
}

// call is a reply that calls tool: a native call, or the JSON protocol's
// command.
func (g rig) call(tool, args string) llmtest.Reply {
	if g.native {
		return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: strings.Replace(tool, "/", "__", 1), Args: json.RawMessage(args)}}}
	}
	return llmtest.Reply{Content: cmd(tool, args, "")}
}

var (
	catalogLine = regexp.MustCompile(`(?m)^- ([\w-]+/[\w-]+)( \(function ([\w-]+)\))?:`)
	answerLine  = regexp.MustCompile(`(?m)^- ([\w-]+/[\w-]+)(?: \(function [\w-]+\))?: (.*)$`)
	removedLine = regexp.MustCompile(`these left your tool list \([^)]*\): (.*)\.`)
)

// offers are the tools request r offers, as server/tool, in order: the
// system prompt's catalog, which with native calls must name exactly the
// functions of the tools field.
func (g rig) offers(t *testing.T, r llmtest.Received) []string {
	t.Helper()
	var names, fns []string
	for _, m := range catalogLine.FindAllStringSubmatch(r.Messages[0].Content, -1) {
		names = append(names, m[1])
		fns = append(fns, m[3])
	}
	if !g.native {
		if r.ToolNames != nil {
			t.Errorf("request %d: the JSON protocol sent a tools field", r.N)
		}
		return names
	}
	if !slices.Equal(fns, r.ToolNames) {
		t.Errorf("request %d: the system prompt lists\n%v\nthe tools field offers\n%v", r.N, fns, r.ToolNames)
	}
	return names
}

// answer is the last search answer request r carries: the tools it says
// joined the tool list, those it says left, and those it says it could not
// load.
func answer(t *testing.T, r llmtest.Received) (text string, loaded, removed, refused []string) {
	t.Helper()
	for _, m := range r.Messages {
		if strings.Contains(m.Content, engine.ResultPrefix+engine.SearchTool) {
			text = m.Content
		}
	}
	if text == "" {
		t.Fatalf("request %d carries no search answer", r.N)
	}
	for _, m := range answerLine.FindAllStringSubmatch(text, -1) {
		if strings.HasPrefix(m[2], "not loaded: ") {
			refused = append(refused, m[1])
		} else {
			loaded = append(loaded, m[1])
		}
	}
	if m := removedLine.FindStringSubmatch(text); m != nil {
		removed = strings.Split(m[1], ", ")
	}
	return text, loaded, removed, refused
}

// minus are the names of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool { return len(minus(a, b)) == 0 && len(minus(b, a)) == 0 }

// withinBudget checks every request against the budget, counted as the
// engine counts, and the tool limit of OpenAI's wire; it returns the
// largest.
func (g rig) withinBudget(t *testing.T, reqs []llmtest.Received) int {
	t.Helper()
	b, largest := g.budget(), 0
	count := engine.RequestCounter(b)
	for _, r := range reqs {
		n := count(r.Messages, r.Tools)
		largest = max(largest, n)
		if n > b.Limit() {
			t.Errorf("request %d takes %d tokens, over the %d-token budget", r.N, n, b.Limit())
		}
		if g.wire == llmtest.WireOpenAI && len(r.ToolNames) > 128 {
			t.Errorf("request %d offers %d tools", r.N, len(r.ToolNames))
		}
	}
	return largest
}

// planned wraps the steps of a plain run in planning mode's: a plan of one
// action before, its end and the verification after.
func (g rig) planned(steps []llmtest.Step) (before int, all []llmtest.Step) {
	if g.loop == "plain" {
		return 0, append(steps, llmtest.Reply{Content: `{"done": true, "comment": "Done."}`})
	}
	b, a := shapeScript("planning")
	all = append(all, llmtest.Reply{Content: b[0]})
	all = append(all, steps...)
	for _, c := range a {
		all = append(all, llmtest.Reply{Content: c})
	}
	return 1, all
}

func rigs(windows []int, loops ...string) []rig {
	var out []rig
	for _, window := range windows {
		for _, wire := range []string{llmtest.WireOpenAI, llmtest.WireOllama} {
			for _, native := range []bool{true, false} {
				for _, loop := range loops {
					out = append(out, rig{wire: wire, native: native, window: window, loop: loop})
				}
			}
		}
	}
	return out
}

// With 140 tools whose ~1 KB schemas pass the catalog's share, under a
// 128k and a 32k window, on both wires, in both modes and both loops: the
// model searches for a tool not offered, the next request offers it and the
// model calls it; three more searches of 8 tools each make room (at 32k)
// by taking out the tools least recently used (called or loaded), and the
// model calls one the last loaded. Each search's answer names exactly what
// the next request adds and takes away, and nothing changes without a
// search; the workspace tools and the search tool stay; no request passes
// the budget. (In the JSON protocol on Ollama, with no tool limit, the
// 140 tools' argument summaries fit a 128k window's share: the catalog is
// offered whole, and that is checked instead.)
func TestSearchedToolIsOfferedNext(t *testing.T) {
	host := catalogHost(t, widgets(140))
	tk := task.Task{Title: "File the widget reports", Body: "Each widget needs its report."}
	for _, g := range rigs([]int{128000, 32768}, "plain", "planning") {
		t.Run(g.String(), func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			e := g.engine(t, w, client(t, g.wire, srv), host)
			if !e.Toolset().Partial() {
				if g.native || g.wire != llmtest.WireOllama || g.window != 128000 {
					t.Fatal("the catalog is offered whole")
				}
				_, script := g.planned(nil)
				srv.Script(script...)
				if out, err := g.runOn(t, e, w, tk); err != nil || out.End != engine.Done {
					t.Fatalf("%+v %v", out, err)
				}
				for _, r := range srv.Requests() {
					if got := g.offers(t, r); len(got) != len(host.Tools()) || slices.Contains(got, engine.SearchTool) {
						t.Errorf("request %d offers %d tools of %d whole", r.N, len(got), len(host.Tools()))
					}
				}
				return
			}
			searches := map[int]bool{0: true, 2: true, 3: true, 4: true} // the steps that search
			before, script := g.planned([]llmtest.Step{
				g.call(engine.SearchTool, `{"query": "widgets of kind 136"}`),
				g.call("many/tool_136", `{"text": "hello"}`),
				g.call(engine.SearchTool, `{"query": "kinds 101 102 103 104 105 106 107 108"}`),
				g.call(engine.SearchTool, `{"query": "kinds 111 112 113 114 115 116 117 118"}`),
				g.call(engine.SearchTool, `{"query": "kinds 121 122 123 124 125 126 127 128"}`),
				g.call("many/tool_125", `{"text": "again"}`),
			})
			srv.Script(script...)
			out, err := g.runOn(t, e, w, tk)
			if err != nil || out.End != engine.Done {
				t.Fatalf("%+v %v", out, err)
			}
			reqs := srv.Requests()[before:]
			offers := make([][]string, len(reqs))
			for i, r := range reqs {
				offers[i] = g.offers(t, r)
				for _, name := range []string{"workspace/read_file", "workspace/write_file", "workspace/edit_file",
					"workspace/list_files", "workspace/search", engine.SearchTool} {
					if !slices.Contains(offers[i], name) {
						t.Errorf("request %d does not offer %s", r.N, name)
					}
				}
			}
			if slices.Contains(offers[0], "many/tool_136") {
				t.Fatal("the first request offers tool 136 already")
			}
			// lastUse is the step in which each tool offered was last called
			// or loaded (0: offered from the start, never called).
			// The workspace tools and the search tool are never taken out.
			lastUse := map[string]int{}
			for _, name := range offers[0] {
				if strings.HasPrefix(name, "many/") {
					lastUse[name] = 0
				}
			}
			removedAny := false
			for i, r := range reqs[1:] {
				prev, next := offers[i], offers[i+1]
				if i == 1 {
					lastUse["many/tool_136"] = 2 // called in step 2
				}
				if !searches[i] {
					if !slices.Equal(prev, next) || r.Messages[0].Content != reqs[i].Messages[0].Content {
						t.Errorf("request %d: the offer changed without a search", r.N)
					}
					continue
				}
				text, loaded, removed, refused := answer(t, r)
				if len(loaded) == 0 || len(refused) != 0 {
					t.Errorf("request %d: the search loaded %v and refused %v:\n%s", r.N, loaded, refused, text)
				}
				if got := minus(next, prev); !sameSet(got, loaded) {
					t.Errorf("request %d adds %v; the search said %v:\n%s", r.N, got, loaded, text)
				}
				if got := minus(prev, next); !sameSet(got, removed) {
					t.Errorf("request %d takes away %v; the search said %v:\n%s", r.N, got, removed, text)
				}
				removedAny = removedAny || len(removed) > 0
				for _, gone := range removed {
					for _, kept := range next {
						if u, ok := lastUse[kept]; ok && lastUse[gone] > u {
							t.Errorf("request %d: the search took out %s (used in step %d) and kept %s (used in step %d)",
								r.N, gone, lastUse[gone], kept, u)
						}
					}
				}
				for _, name := range loaded {
					lastUse[name] = i + 1
				}
			}
			if g.window == 32768 && !removedAny {
				t.Error("at 32k the searches made room without taking a tool out")
			}
			if !slices.Contains(offers[1], "many/tool_136") || !slices.Contains(offers[5], "many/tool_125") {
				t.Fatal("a tool the model calls is not offered")
			}
			if last := reqs[2].Messages[len(reqs[2].Messages)-1].Content; !strings.Contains(last, "tool_136 says hello") {
				t.Errorf("tool 136 did not run: %q", last)
			}
			if last := reqs[6].Messages[len(reqs[6].Messages)-1].Content; !strings.Contains(last, "tool_125 says again") {
				t.Errorf("tool 125 did not run: %q", last)
			}
			largest := g.withinBudget(t, srv.Requests())
			t.Logf("offered first %d tools, last %d; the largest request %d tokens of %d", len(offers[0]), len(offers[len(offers)-1]),
				largest, g.budget().Limit())
		})
	}
}

// hugeSchema is a tool's input schema of 200 fields with long descriptions:
// more than a 32k window's catalog share, as a native definition and as
// the JSON protocol's summary.
var hugeSchema = func() json.RawMessage {
	props := map[string]any{"text": map[string]any{"type": "string"}}
	for i := range 200 {
		props[fmt.Sprintf("field_%03d", i)] = map[string]any{"type": "string", "description": strings.Repeat(fmt.Sprintf("What field %d holds. ", i), 15)}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	return b
}()

// A tool the search finds but that is alone larger than the catalog's
// share is named as not loaded, with why, and as nothing callable; the next
// request does not offer it. Called anyway, it runs (every tool of the
// catalog is allowed), and the offer does not change.
func TestFoundToolTooLargeToOffer(t *testing.T) {
	host := catalogHost(t, widgets(140), mcpServer{name: "big", tools: []toolSpec{{name: "render_everything",
		desc: "Renders every dashboard of the estate at once.", schema: hugeSchema}}})
	for _, g := range rigs([]int{32768}, "plain") {
		t.Run(g.String(), func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Options{})
			srv.Script(g.call(engine.SearchTool, `{"query": "render every dashboard"}`),
				g.call("big/render_everything", `{"text": "anyway"}`),
				llmtest.Reply{Content: `{"done": true, "comment": "Rendered."}`})
			w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
			out, err := g.run(t, w, client(t, g.wire, srv), host, task.Task{Title: "Show the estate", Body: "We need to see it all."})
			if err != nil || out.End != engine.Done {
				t.Fatalf("%+v %v", out, err)
			}
			reqs := srv.Requests()
			text, loaded, removed, refused := answer(t, reqs[1])
			if len(loaded) != 0 || len(removed) != 0 || !slices.Equal(refused, []string{"big/render_everything"}) ||
				!strings.Contains(text, "No tool was loaded") || strings.Contains(text, "callable") ||
				!regexp.MustCompile(`its definition alone takes \d+ tokens, more than the \d+ your tool list has for it`).MatchString(text) {
				t.Errorf("the search answered:\n%s", text)
			}
			for i, r := range reqs {
				if slices.Contains(g.offers(t, r), "big/render_everything") {
					t.Errorf("request %d offers the tool too large to offer", r.N)
				}
				if i > 0 && !slices.Equal(g.offers(t, r), g.offers(t, reqs[0])) {
					t.Errorf("request %d offers other tools than the first", r.N)
				}
			}
			if last := reqs[2].Messages[len(reqs[2].Messages)-1].Content; !strings.Contains(last, "render_everything says anyway") {
				t.Errorf("the tool called anyway did not run: %q", last)
			}
			g.withinBudget(t, reqs)
		})
	}
}

// mrPipelines is a task about merge request pipelines.
var mrPipelines = task.Task{Title: "Merge request pipelines fail since the cache moved",
	Body: "Every pipeline of a merge request fails in its test job since the build cache moved to another runner. " +
		"Find the failing job, read its log and fix the CI configuration in the repository."}

// With a GitLab server's 118 tools under a 32k window, the first request
// offers the tools that match the task (about merge request pipelines: the
// pipeline and job tools) among the many that do not, and the workspace
// tools always; the same task is offered the same tools every time, another
// task other tools; the first request leaves at least three quarters of the
// window free.
func TestTaskWordsChooseTheToolsOffered(t *testing.T) {
	host := catalogHost(t, gitlab())
	if n := len(host.Tools()); n != 5+118 {
		t.Fatalf("%d tools", n)
	}
	for _, g := range rigs([]int{32768}, "plain", "planning") {
		t.Run(g.String(), func(t *testing.T) {
			first := func(tk task.Task) llmtest.Received {
				srv := llmtest.NewServer(t, llmtest.Options{})
				_, script := g.planned(nil)
				srv.Script(script...)
				w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
				if out, err := g.run(t, w, client(t, g.wire, srv), host, tk); err != nil || out.End != engine.Done {
					t.Fatalf("%+v %v", out, err)
				}
				r := srv.Requests()[0]
				if n := engine.RequestCounter(g.budget())(r.Messages, r.Tools); n > g.window/4 {
					t.Errorf("the first request takes %d tokens, more than a quarter of the %d-token window", n, g.window)
				} else {
					t.Logf("%q: the first request takes %d tokens of the %d-token window, %d tools", tk.Title, n, g.window, len(g.offers(t, r)))
				}
				return r
			}
			r := first(mrPipelines)
			offered := g.offers(t, r)
			for _, name := range []string{"workspace/read_file", "workspace/write_file", "workspace/edit_file", "workspace/list_files",
				"workspace/search", engine.SearchTool, "gitlab/list_merge_request_pipelines", "gitlab/retry_pipeline",
				"gitlab/list_pipeline_jobs", "gitlab/get_job_log", "gitlab/get_pipeline"} {
				if !slices.Contains(offered, name) {
					t.Errorf("the first request does not offer %s; it offers %v", name, offered)
				}
			}
			pipelines := 0
			for _, name := range offered {
				if strings.Contains(name, "pipeline") {
					pipelines++
				}
			}
			if pipelines < 6 {
				t.Errorf("the first request offers %d pipeline tools: %v", pipelines, offered)
			}
			for _, name := range []string{"gitlab/list_projects", "gitlab/get_project", "gitlab/create_label", "gitlab/list_wiki_pages",
				"gitlab/list_tags", "gitlab/create_project_hook"} {
				if slices.Contains(offered, name) {
					t.Errorf("the first request offers %s, unrelated to the task", name)
				}
			}
			again := first(mrPipelines)
			if !slices.Equal(g.offers(t, again), offered) || again.Messages[0].Content != r.Messages[0].Content {
				t.Error("the same task was offered other tools")
			}
			other := first(task.Task{Title: "Tag the release", Body: "Create the tag v2.0 and its release notes."})
			if otherOffered := g.offers(t, other); slices.Equal(otherOffered, offered) ||
				!slices.Contains(otherOffered, "gitlab/create_release") || !slices.Contains(otherOffered, "gitlab/create_tag") {
				t.Errorf("the release task was offered %v", otherOffered)
			}
		})
	}
}

// killAt ends the process at its at-th model request (as a process killed
// while it waits for the model), passing the others to the model; with w
// set, left is the world as it was then.
type killAt struct {
	llm.Client
	at, n int
	t     *testing.T
	w     *world
	left  *world
}

func (k *killAt) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	k.n++
	if k.n == k.at {
		if k.w != nil {
			k.left = k.w.snapshot(k.t)
		}
		return llm.Response{}, errKilled
	}
	return k.Client.Chat(ctx, req)
}

// A run killed after a search resumes offering what the search loaded,
// with the same system prompt; so does one whose checkpoint was written
// before offers were kept (it held the loaded tools only).
func TestResumedRunOffersTheLoadedTools(t *testing.T) {
	host := catalogHost(t, widgets(140))
	for _, g := range rigs([]int{32768}, "plain") {
		for _, older := range []bool{false, true} {
			name := g.String()
			if older {
				name += "/older checkpoint"
			}
			t.Run(name, func(t *testing.T) {
				srv := llmtest.NewServer(t, llmtest.Options{})
				srv.Script(g.call(engine.SearchTool, `{"query": "widgets of kind 136"}`),
					g.call("many/tool_136", `{"text": "after the restart"}`),
					llmtest.Reply{Content: `{"done": true, "comment": "Done."}`})
				w := &world{cps: map[task.Ref]store.Checkpoint{}, comments: map[int64]string{}, history: t.TempDir()}
				tk := task.Task{Title: "File the widget reports", Body: "Each widget needs its report."}
				k := &killAt{Client: client(t, g.wire, srv), at: 2, t: t, w: w}
				if _, err := g.run(t, w, k, host, tk); err == nil || !strings.Contains(err.Error(), errKilled.Error()) {
					t.Fatalf("the first process ended with %v", err)
				}
				left := k.left
				var saved struct {
					Messages []llm.Message `json:"messages"`
					Offered  []engine.Offer
				}
				cp := left.cps[ref]
				if err := json.Unmarshal(cp.Data, &saved); err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(saved.Offered, func(o engine.Offer) bool { return o.Tool == "many/tool_136" && o.Used == 1 }) {
					t.Fatalf("the checkpoint's offer %v lacks tool 136, loaded at request 1", saved.Offered)
				}
				if older {
					var raw map[string]any
					if err := json.Unmarshal(cp.Data, &raw); err != nil {
						t.Fatal(err)
					}
					delete(raw, "offered")
					raw["loaded"] = []string{"many/tool_136"}
					cp.Data, _ = json.Marshal(raw)
					left.cps[ref] = cp
				}
				out, err := g.run(t, left, client(t, g.wire, srv), host, tk)
				if err != nil || out.End != engine.Done {
					t.Fatalf("resumed: %+v %v", out, err)
				}
				reqs := srv.Requests()
				resumed := reqs[1]
				if !slices.Contains(g.offers(t, resumed), "many/tool_136") {
					t.Errorf("the resumed run does not offer tool 136: %v", g.offers(t, resumed))
				}
				if !older && resumed.Messages[0].Content != saved.Messages[0].Content {
					t.Error("the resumed run's system prompt is not the one saved")
				}
				if last := reqs[2].Messages[len(reqs[2].Messages)-1].Content; !strings.Contains(last, "tool_136 says after the restart") {
					t.Errorf("tool 136 did not run: %q", last)
				}
				g.withinBudget(t, reqs)
			})
		}
	}
}
