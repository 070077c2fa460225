package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/config"
)

// llm.record is off unless set; a file that is, or can be, there is
// taken, relative to the working directory; what stands in its way is a
// problem at the key, on its line.
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("afile", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("afolder", 0o700); err != nil {
		t.Fatal(err)
	}
	if c, _ := mustParse(t, minimalGitHub, nil); c.LLM.Record != "" {
		t.Errorf("default record %q, want off", c.LLM.Record)
	}
	for _, p := range []string{"model.jsonl", "new/folders/model.jsonl", "afile", "afolder/model.jsonl", filepath.Join(dir, "abs.jsonl"),
		"${REC}"} {
		c, _ := mustParse(t, minimalGitHub+"  record: "+p+"\n", map[string]string{"REC": "from-env.jsonl"})
		if want := strings.ReplaceAll(p, "${REC}", "from-env.jsonl"); c.LLM.Record != want {
			t.Errorf("record %q, want %q", c.LLM.Record, want)
		}
	}
	for _, tc := range []struct{ value, msg string }{
		{`"  "`, "must name a file (or be left out: no recording)"},
		{"~/model.jsonl", "~ is not expanded: write ${HOME}/..."},
		{"logs/", "must name a file, not a folder, such as logs/model.jsonl"},
		{"afolder", "is a folder: name a file in it, such as afolder/model.jsonl"},
		{"afile/model.jsonl", "its folder cannot be made: afile is a file"},
		{"afile/deeper/model.jsonl", "its folder cannot be made: afile is a file"},
		{"/dev/null", "is not a regular file: /dev/null"},
	} {
		got := problems(t, minimalGitHub+"  record: "+tc.value+"\n", nil)
		want := config.Problems{{Path: "llm.record", Msg: tc.msg, Line: 10}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tc.value, diff)
		}
	}
}
