package engine

import (
	"encoding/json"
	"strings"
	"testing"

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
