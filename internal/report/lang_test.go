package report

import (
	"regexp"
	"strings"
	"testing"
	"text/template/parse"
	"time"
	"unicode"
)

// japanese reports whether s holds a kana or CJK character.
func japanese(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Han) || (r >= 0xFF01 && r <= 0xFF5E) || r == '。' || r == '、' {
			return true
		}
	}
	return false
}

// englishWord finds an English word in a Japanese template's fixed text:
// three ASCII letters or more, other than the names the Japanese comments
// keep as they are.
var englishWord = regexp.MustCompile(`[A-Za-z]{3,}`)

// Besides names: the words of hidden marks (coding-agent:round n= head=, the
// change block's, the holder's and the pause's), a fence's language (diff) and the keywords GitHub and GitLab act on only in English
// (Closes, Refs).
var keptNames = map[string]bool{"LLM": true, "coding": true, "agent": true, "UTC": true,
	"round": true, "rounds": true, "head": true, "change": true, "Closes": true, "Refs": true,
	"holder": true, "host": true, "beat": true, "paused": true, "diff": true, "JSON": true}

// fixedText is the text a template writes whatever its data.
func fixedText(n parse.Node) string {
	var b strings.Builder
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.TextNode:
			b.Write(n.Text)
			b.WriteByte('\n')
		case *parse.IfNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.List)
			walk(n.ElseList)
		}
	}
	walk(n)
	return b.String()
}

// Every template is in one language: an English one (its name has /en, or
// no language) writes no Japanese, a Japanese one
// (/ja) no English word, in any branch of its fixed text; and each /en
// template has its /ja twin and back.
// langSegment is the language part of a template's name: /en or /ja as a
// whole segment (conversation/ja/ended is Japanese, not English).
var langSegment = regexp.MustCompile(`/(en|ja)(?:/|$)`)

func TestTemplatesKeepToOneLanguage(t *testing.T) {
	names := map[string]bool{}
	for _, tm := range templates.Templates() {
		if tm.Tree == nil || tm.Name() == "" || strings.HasSuffix(tm.Name(), ".tmpl") && strings.Contains(tm.Name(), "_") {
			continue // a file's own template: its defines are checked by name
		}
		names[tm.Name()] = true
		text := fixedText(tm.Tree.Root)
		if strings.Contains(tm.Name(), "/ja") {
			for _, w := range englishWord.FindAllString(text, -1) {
				if !keptNames[w] {
					t.Errorf("Japanese template %s writes the English word %q", tm.Name(), w)
				}
			}
			continue
		}
		if japanese(text) {
			t.Errorf("English template %s writes Japanese: %q", tm.Name(), text)
		}
	}
	for name := range names {
		m := langSegment.FindStringSubmatchIndex(name)
		if m == nil {
			continue
		}
		twin := map[string]string{"en": "ja", "ja": "en"}[name[m[2]:m[3]]]
		if !names[name[:m[2]]+twin+name[m[3]:]] {
			t.Errorf("template %s has no /%s twin", name, twin)
		}
	}
}

// What the comment functions render in one language holds nothing of the
// other, for the same data (data in neither language).
func TestCommentsRenderInOneLanguage(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ran := []Command{{Command: "python3 -m unittest", ExitCode: 0}, {Command: "pytest", ExitCode: 1, Output: "1 failed"}}
	steps := []Step{{N: 1, Phase: "planning", Comment: "x", Calls: []StepCall{{Tool: "fs/write_file", Target: "a.py", Failed: true}}},
		{N: 2, Phase: "execution", Repeats: 1, Note: "y"}, {N: 3, Done: true}}
	for _, l := range []Lang{English, Japanese} {
		var out []string
		add := func(s string, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		add(l.Living(Live{Progress: "p", Steps: steps, Earlier: 2, Now: "execution", UpdatedAt: at}, 0))
		add(l.Living(Live{Steps: steps, Finished: true, UpdatedAt: at}, 0))
		add(l.Living(Live{}, 0))
		add(l.Closing(Closing{Comment: "x", Ignored: 2, Delivery: "https://x/1"}))
		add(l.Closing(Closing{Comment: "✅ x", Ran: ran, Checks: ran}))
		add(l.Closing(Closing{Comment: "x passes"}))
		add(Evidence(l, ran, ran))
		add(l.Call("verification", 3, "", "", at))
		add(l.Call("execution", 4, "x", "a1", at))
		add(l.ToolError("fs/x", "e\nf", "a1", at))
		add(l.LLMError("reflection", "e", true, at))
		add(l.Progress(Progress{Goal: "g", Actions: []ProgressAction{{ID: "a1", Status: ActionDone}, {ID: "a2", Status: ActionFailed, Note: "n"},
			{ID: "a3", Status: ActionSkipped}, {ID: "a4"}}, Revisions: []ProgressRevision{{N: 1, Reason: "r", Changes: []string{"c"}, At: at}},
			Notes: []string{"n"}, Phase: "revision", UpdatedAt: at}))
		add(l.Progress(Progress{Finished: true}))
		for _, outcome := range []Final{{Succeeded: true, VerificationRan: true, VerificationPassed: true, Criteria: []Criterion{{Text: "c", Met: true}}},
			{Succeeded: true, VerificationRan: true}, {Reason: "r", Checks: ran, Receipt: Receipt{Compactions: 1, Duration: time.Hour}}} {
			outcome.IgnoredComments = 1
			add(l.Final(outcome))
		}
		add(l.Failed("r", "F", "B", "/w", "", ""))
		add(l.Kept("/w"))
		add(l.Interrupted(3))
		add(l.StoreFailed(3, "r"))
		add(l.StoreLost(0, "r"))
		add(l.TakenOver(TakeOver{From: "h1", To: "h2", Until: "t"}))
		add(l.TakenOver(TakeOver{From: "h1", To: "h2", Released: true}))
		add(l.Paused(2, "r", "P", "B", "h"))
		add(l.Stopped(2, "r", "B"))
		add(l.Refused("bob", "B"))
		add(l.Refused("", "B"))
		add(l.Holder("h", at, time.Minute, 3*time.Minute))
		add(l.Patch("merge request", "-a\n+b"))
		add(l.Delivered(Delivery{Commit: "c", Branch: "b", Kind: "pull request", ChangeURL: "https://x/1", Opened: true, Draft: true,
			LeftOut: []LeftOut{{Path: "p", Reason: "r"}}}))
		add(l.Delivered(Delivery{Kind: "merge request", ChangeURL: "https://x/1"}))
		cut, _ := cutToFit(strings.Repeat("x\n", 100), 64, l)
		out = append(out, cut)
		out = append(out, l.ToolStep([]StepCall{{Tool: "fs/edit_file", Target: "a.py"}}), l.SameAsPrevious(2), l.ActionFailed("a1", "r"),
			l.SkippedAction("a1", "r"), l.CommentApplied("bob", "a1", at), l.FixChecks(ran), l.CallTrouble("r", true), l.ToolFailed("t", "e"))
		for _, s := range out {
			if l == English && japanese(s) {
				t.Errorf("English comment holds Japanese:\n%s", s)
			}
			if l == Japanese {
				for _, w := range englishWord.FindAllString(stripCode(s), -1) {
					if !keptNames[w] && !dataWords[w] {
						t.Errorf("Japanese comment holds the English word %q:\n%s", w, s)
					}
				}
			}
		}
	}
}

// dataWords are the words of the test's data and the names shown as they
// are (tools, phases never are: they are translated).
var dataWords = map[string]bool{"https": true, "passes": true, "bob": true}

// stripCode removes code spans and fences: commands and paths are shown
// as they are.
func stripCode(s string) string {
	s = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(s, "")
	return regexp.MustCompile("`[^`]*`").ReplaceAllString(s, "")
}
