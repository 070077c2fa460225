package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// fsTools are three tools of @modelcontextprotocol/server-filesystem as it
// lists them (descriptions shortened).
var fsTools = []toolhost.Tool{
	{Server: "fs", Name: "read_text_file", ReadOnly: true,
		Description: "Read the complete contents of a file from the file system as text. Handles various text encodings\nand provides detailed error messages if the file cannot be read.",
		InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"tail":{"type":"number","description":"If provided, returns only the last N lines of the file"},"head":{"type":"number","description":"If provided, returns only the first N lines of the file"}},"required":["path"]}`)},
	{Server: "fs", Name: "edit_file",
		Description: "Make line-based edits to a text file. Each edit replaces exact line sequences with new content.",
		InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to search for - must match exactly"},"newText":{"type":"string","description":"Text to replace with"}},"required":["oldText","newText"]}},"dryRun":{"default":false,"description":"Preview changes using git-style diff format","type":"boolean"}},"required":["path","edits"]}`)},
	{Server: "fs", Name: "list_allowed_directories", Description: "Returns the list of directories that this server is allowed to access.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
}

var fsServers = []toolhost.ServerConfig{{Name: "fs", SystemPrompt: "The project lives in /work."}}

func TestNativeCatalogNamesToolsWithoutSchemas(t *testing.T) {
	ts := NewToolset(fsTools, fsServers, true)
	got, err := ts.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	want := `Tools (call them as functions; their parameters are in the function definitions):

- fs/read_text_file (function fs__read_text_file): Read the complete contents of a file from the file system as text. (read-only)
- fs/edit_file (function fs__edit_file): Make line-based edits to a text file.
- fs/list_allowed_directories (function fs__list_allowed_directories): Returns the list of directories that this server is allowed to access.

Notes for the fs tools:
The project lives in /work.`
	if got != want {
		t.Errorf("native catalog:\n%s\nwant:\n%s", got, want)
	}
	// The schemas travel once, in the tools field.
	for _, d := range ts.Defs(nil) {
		if strings.Contains(got, string(d.Parameters)) || strings.Contains(got, `"properties"`) {
			t.Errorf("the system prompt repeats the schema of %s", d.Name)
		}
	}
	if len(ts.Defs(nil)) != 3 || !strings.Contains(string(ts.Defs(nil)[1].Parameters), "oldText") ||
		!strings.Contains(ts.Defs(nil)[0].Description, "detailed error messages") {
		t.Errorf("tool definitions lost their schema or description: %+v", ts.Defs(nil))
	}
}

func TestJSONCatalogListsToolsCompactly(t *testing.T) {
	ts := NewToolset(fsTools, fsServers, false)
	got, err := ts.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	want := `Tools, each with its arguments ("name?" is optional, "= x" a default, T[] a list of T, {…} an object):

- fs/read_text_file: Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. (read-only)
  args: path string; head? number (If provided, returns only the first N lines of the file); tail? number (If provided, returns only the last N lines of the file)
- fs/edit_file: Make line-based edits to a text file. Each edit replaces exact line sequences with new content.
  args: path string; edits {oldText string (Text to search for - must match exactly), newText string (Text to replace with)}[]; dryRun? boolean = false (Preview changes using git-style diff format)
- fs/list_allowed_directories: Returns the list of directories that this server is allowed to access.
  args: none

Notes for the fs tools:
The project lives in /work.`
	if got != want {
		t.Errorf("JSON catalog:\n%s\nwant:\n%s", got, want)
	}
	if ts.Defs(nil) != nil {
		t.Error("the JSON protocol sends no tools field")
	}
}

func TestParamSummary(t *testing.T) {
	long := strings.Repeat("word ", 100)
	for _, tc := range []struct{ schema, want string }{
		{``, "none"},
		{`{}`, "none"},
		{`{"type":"object"}`, "none"},
		{`{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":["string","null"]}},"required":["b","b"]}`, "b integer; a? string"},
		{`{"properties":{"state":{"type":"string","enum":["open","closed"],"default":"open"}}}`, `state? "open"|"closed" = "open"`},
		{`{"properties":{"v":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"null"}]}}}`, "v? string|number"},
		{`{"properties":{"v":{"type":"array","items":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}}`, "v? (string|integer)[]"},
		{`{"properties":{"v":{"type":"array"}}}`, "v? array"},
		{`{"properties":{"v":{"type":"array","items":{"type":"object","properties":{"x":{"type":["string","number"]}}}}}}`, "v? {x? string|number}[]"},
		{`{"properties":{"v":{"type":"array","items":[{"type":"string"}]}}}`, "v? array"},
		{`{"properties":{"v":{"const":"x"}, "w":{}}}`, `v? "x"; w? any`},
		{`{"properties":{"p":{"$ref":"#/$defs/P"},"q":{"$ref":"#/definitions/Q"},"r":{"$ref":"http://x"}},"$defs":{"P":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},"definitions":{"Q":{"type":"boolean"}}}`,
			"p? {x number}; q? boolean; r? any"},
		{`{"properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"object","properties":{"d":{"type":"object","properties":{"e":{"type":"string"}}}}}}}}}}}`,
			"a? {b? {c? {d? object}}}"},
		{`{"properties":{"d":{"type":"string","description":"` + long + `"}}}`, "d? string (" + strings.TrimSpace(long[:300]) + "…)"},
		// What the summary cannot read is given whole.
		{`{"type":"array","items":{"type":"string"}}`, `{"type":"array","items":{"type":"string"}}`},
		{`{"type":"object","properties":[1]}`, `{"type":"object","properties":[1]}`},
		{`{"properties":{"n":{"type":"null"}}}`, "n? null"},
	} {
		if got := paramSummary(json.RawMessage(tc.schema)); got != tc.want {
			t.Errorf("paramSummary(%s)\n = %s\nwant %s", tc.schema, got, tc.want)
		}
	}
}

func TestBrief(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"Get a file.  Returns its text.", 160, "Get a file."},
		{"v1.2 of the API. Second.", 160, "v1.2 of the API."},
		{"no sentence end but long words here", 20, "no sentence end but…"},
		{"", 160, ""},
		{"日本語の説明です。とても長い", 10, "日本語…"},
	} {
		if got := brief(tc.in, tc.n); got != tc.want {
			t.Errorf("brief(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// genCatalog is n generated tools of a server "gen" (names and
// descriptions from a GitLab-like vocabulary, schemas of 200 B to 1.5 KB)
// after the three tools of an in-process, task-scoped workspace server.
func genCatalog(n int) ([]toolhost.Tool, []toolhost.ServerConfig) {
	nouns := strings.Fields("issue pipeline merge_request branch commit label milestone release tag wiki_page job log artifact " +
		"deployment environment variable member group project note thread draft diff file tree user event snippet")
	verbs := strings.Fields("list get create update delete")
	tools := []toolhost.Tool{
		{Server: "workspace", Name: "read_file", Description: "Reads a file of the checkout.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Server: "workspace", Name: "edit_file", Description: "Edits a file of the checkout.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Server: "workspace", Name: "run_command", Description: "Runs a command in the checkout.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)},
	}
	for i := range n {
		noun, other := nouns[(i/len(verbs))%len(nouns)], nouns[(i*7)%len(nouns)]
		props := map[string]any{"project_id": map[string]any{"type": "string", "description": "The ID or path of the project"}}
		for k := range (i * 97) % 12 {
			props[fmt.Sprintf("field_%d", k)] = map[string]any{"type": "string", "description": "An optional field the " + noun + " has, left out to keep its value"}
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		tools = append(tools, toolhost.Tool{Server: "gen", Name: fmt.Sprintf("%s_%s_%d", verbs[i%len(verbs)], noun, i),
			Description: fmt.Sprintf("%s a %s of a project, with its %s.", strings.ToUpper(verbs[i%len(verbs)][:1])+verbs[i%len(verbs)][1:],
				strings.ReplaceAll(noun, "_", " "), strings.ReplaceAll(other, "_", " ")),
			InputSchema: schema})
	}
	servers := []toolhost.ServerConfig{{Name: "workspace", Scope: toolhost.ScopeTask,
		InProcess: func(toolhost.TaskVars) (*mcp.Server, error) { return nil, errors.New("not started in this test") }}, {Name: "gen"}}
	return tools, servers
}

// Whatever a run searches and calls, its offer stays inside the catalog's
// share and the tool limit; the workspace tools and the search tool are
// always offered; what a search loads is offered, what it takes out is
// not, and what it takes out was used no later than anything it kept; a
// tool used in the same step is never taken out.
func TestOfferKeepsItsShare(t *testing.T) {
	tools, servers := genCatalog(300)
	words := strings.Fields("issue pipeline merge request branch commit label milestone release tag wiki page job log artifact " +
		"deployment environment variable member group project note thread draft diff file tree user event snippet list get create update delete")
	for _, native := range []bool{true, false} {
		for _, limits := range [][2]int{{128, 6000}, {0, 2500}, {40, 0}} {
			ts := NewToolset(tools, servers, native)
			if !ts.limit(limits[0], limits[1], llm.Estimate{}.Count) {
				t.Fatal("the catalog is offered whole")
			}
			if len(ts.pinned) != 3 {
				t.Fatalf("%d tools always offered", len(ts.pinned))
			}
			rnd := rand.New(rand.NewPCG(1, uint64(limits[0]+limits[1])))
			offer := ts.choose("Fix the pipeline", "The merge request pipeline fails in the test job.")
			removals := 0
			for step := 1; step <= 400; step++ {
				before := slices.Clone(offer)
				var s searched
				switch rnd.IntN(3) {
				case 0:
					q := make([]string, 1+rnd.IntN(3))
					for k := range q {
						q[k] = words[rnd.IntN(len(words))]
					}
					offer, s = ts.load(offer, ts.search(strings.Join(q, " "), offer), step)
				case 1:
					if len(offer) > 0 {
						offer[rnd.IntN(len(offer))].Used = step
					}
				}
				if limits[1] > 0 && ts.offerCost(offer) > limits[1] {
					t.Fatalf("step %d: the offer costs %d of a share of %d", step, ts.offerCost(offer), limits[1])
				}
				names := []string{}
				for _, d := range ts.offered(offer) {
					names = append(names, d.FullName())
				}
				if limits[0] > 0 && len(names) > limits[0] {
					t.Fatalf("step %d: %d tools offered", step, len(names))
				}
				want := []string{"workspace/read_file", "workspace/edit_file", "workspace/run_command", SearchTool}
				if !slices.Equal(names[:4], want) || slices.ContainsFunc(names[4:], func(n string) bool { return slices.Contains(want, n) }) {
					t.Fatalf("step %d: offered %v", step, names[:4])
				}
				for _, n := range s.loaded {
					if !slices.ContainsFunc(offer, func(o Offer) bool { return o.Tool == n && o.Used == step }) {
						t.Fatalf("step %d: %s loaded but not offered", step, n)
					}
				}
				removals += len(s.removed)
				for _, gone := range s.removed {
					k := slices.IndexFunc(before, func(o Offer) bool { return o.Tool == gone })
					if k < 0 || before[k].Used >= step || slices.ContainsFunc(offer, func(o Offer) bool { return o.Tool == gone }) {
						t.Fatalf("step %d: %s taken out wrongly", step, gone)
					}
					for _, kept := range offer {
						if kept.Used < step && kept.Used < before[k].Used {
							t.Fatalf("step %d: %s (used %d) taken out before %s (used %d)", step, gone, before[k].Used, kept.Tool, kept.Used)
						}
					}
				}
				seen := map[string]bool{}
				for _, o := range offer {
					if seen[o.Tool] {
						t.Fatalf("step %d: %s offered twice", step, o.Tool)
					}
					seen[o.Tool] = true
				}
			}
			if removals == 0 {
				t.Errorf("limits %v: no search took a tool out", limits)
			}
		}
	}
}

func TestStems(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"list_merge_request_pipelines", "list merg request pipelin"},
		{"listPipelines getJobLog", "list pipelin get job log"},
		{"The pipelines failed; merging branches", "pipelin fail merg branch"},
		{"created, creating, creates: status of dependencies", "creat creat creat status dependency"},
		{"a tool_136 of kind 136 é", "tool 136 kind 136"},
	} {
		if got := strings.Join(stems(tc.in), " "); got != tc.want {
			t.Errorf("stems(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The task's words pick the tools; two words the catalog writes together
// count once, so that "merge request pipelines" is about pipelines first.
func TestTaskWordsRankTools(t *testing.T) {
	var tools []toolhost.Tool
	for _, name := range strings.Fields("get_merge_request list_merge_requests create_merge_request update_merge_request " +
		"list_pipelines get_pipeline list_merge_request_pipelines create_label list_wiki_pages") {
		tools = append(tools, toolhost.Tool{Server: "gitlab", Name: name, Description: strings.ReplaceAll(name, "_", " ") + " of a project"})
	}
	ix := newWordIndex(tools)
	q := map[string]float64{}
	ix.query(q, "Merge request pipelines fail", titleWeight)
	order, scores, matched := ix.ranked([]int{0, 1, 2, 3, 4, 5, 6, 7, 8}, q)
	var got []string
	for k, i := range order[:matched] {
		got = append(got, fmt.Sprintf("%s %.1f", tools[i].Name, scores[k]))
	}
	if matched != 7 || tools[order[0]].Name != "list_merge_request_pipelines" ||
		!strings.HasSuffix(tools[order[1]].Name, "pipeline") && !strings.HasSuffix(tools[order[1]].Name, "pipelines") ||
		!strings.Contains(tools[order[2]].Name, "pipeline") {
		t.Errorf("ranked %v", got)
	}
}

// Choosing the first request's tools for a long task, and a search with
// its loads, among 500 tools.
func BenchmarkChoose500(b *testing.B) {
	tools, servers := genCatalog(500)
	ts := NewToolset(tools, servers, true)
	ts.limit(128, 8000, llm.Estimate{}.Count)
	body := strings.Repeat("The merge request pipeline fails in the test job since the cache moved; read the job log. ", 250)[:20000]
	b.ResetTimer()
	for b.Loop() {
		ts.choose("Merge request pipelines fail", body)
	}
}

func BenchmarkSearchAndLoad500(b *testing.B) {
	tools, servers := genCatalog(500)
	ts := NewToolset(tools, servers, true)
	ts.limit(128, 8000, llm.Estimate{}.Count)
	offer := ts.choose("Merge request pipelines fail", "The pipeline fails.")
	queries := []string{"release tag", "wiki page note", "deployment environment", "merge request diff", "job artifact log"}
	step := 1
	b.ResetTimer()
	for b.Loop() {
		step++
		offer, _ = ts.load(offer, ts.search(queries[step%len(queries)], offer), step)
	}
}

// Preparing a catalog of 500 tools once, at start: its costs counted with
// OpenAI's tokenizer, the word index, the choice without task words.
func BenchmarkLimit500(b *testing.B) {
	tools, servers := genCatalog(500)
	for b.Loop() {
		ts := NewToolset(tools, servers, true)
		ts.limit(128, 8000, tokens.ForModel("gpt-4o").Count)
	}
}
