package watch

import (
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

// botSaid is the bot's own comment the replies below may quote.
var botSaid = []string{"Created hello.txt with a greeting. Please check it and reply here if anything is missing.\n\n" +
	"Reply to continue, or add the label again to make more changes."}

// Replies as people write them, each with the judgement a person would
// make: E ends the conversation, C starts a new round, M asks the model.
func TestJudgeReply(t *testing.T) {
	const E, C, M = End, Continue, Unsure
	for _, c := range []struct {
		body string
		want Verdict
	}{
		// Thanks and approval only.
		{"Thanks!", E},
		{"Thank you very much, this is perfect.", E},
		{"LGTM 👍", E},
		{"Looks good, thanks for the quick fix!", E},
		{"OK", E},
		{"ok thx", E},
		{"Thanks, that is all.", E},
		{"Thanks, nothing else needed.", E},
		{"Thanks, keep up the good work!", E},
		{"Thanks! It works now.", E},
		{"Thanks a lot, @coding-agent!", E},
		{"👍", E},
		// Requests, hidden after thanks or approval: mid-sentence, after a
		// line break, after a colon.
		{"Thanks, that looks right. One more thing: please keep `slugify` as it is.", C},
		{"OK, now please also add a test for the empty string.", C},
		{"When you are done, please also update the README.", C},
		{"Thanks! Could you also add a test?", C},
		{"Thanks.\nAdd a changelog entry too.", C},
		{"Great work, thanks. Also rename `foo` to `bar`.", C},
		{"Thanks, but the header should be bold.", C},
		{"Done, thanks. Don't forget to update the docs.", C},
		{"Perfect. When you get a chance, squash the commits", C},
		{"LGTM.\n\nOne more thing though: the `slugify` helper must keep its name.", C},
		{"Thanks, that is not what I meant.", C},
		{"This is not done yet.", C},
		{"Rename the function to `slugify_title`.", C},
		// Quoted text from the bot's own comment is not the author's request.
		{"> Please check it and reply here if anything is missing.\n\nThanks, all good.", E},
		{"Thanks!\n\n> Reply to continue, or add the label again to make more changes.", E},
		{"Created hello.txt with a greeting. Please check it and reply here if anything is missing.\nThanks, perfect.", E},
		{"On Mon, Nov 24, 2026 at 9:00 AM coding-agent wrote:\n> Please check it.\n\nThanks!", E},
		// Neither plainly: the model is asked.
		{"Thanks for adding the tests, they pass on my machine.", M},
		{"Thanks, I will merge it after lunch.", M},
		{"Thanks, although I wonder whether the regex is too strict.", M},
		{"Hmm.", M},
		{"> Please check it.", M}, // nothing but the quote
		// Japanese.
		{"ありがとうございました！", E},
		{"ありがとうございます。完璧です。", E},
		{"修正ありがとうございます、問題ありません。", E},
		{"LGTM です。ありがとうございました。", E},
		{"確認しました。ありがとうございます。", E},
		{"対応してくれてありがとう！助かりました。", E},
		{"👍 ありがとう", E},
		{"> 完了したらラベルを付け直してください。\n\nありがとうございます！", E},
		{"ありがとうございます。もう一つ、slugify はそのまま残してください。", C},
		{"了解です。次にテストも追加してください。", C},
		{"ありがとう、でもテストも追加できますか？", C},
		{"ありがとうございます。\nREADME も更新してほしいです。", C},
		{"作業が終わったら、CHANGELOG も更新してください。", C},
		{"OKです、では次にエラー処理を追加して。", C},
		{"まだ完了していません。", C},
		{"ありがとうございます。slugify の件は後で確認します。", M},
		{"ありがとうございます。ただ、少し気になる点があります。", M},
		{"ありがとうございます。引き続きよろしくお願いします。", M},
		{"よろしくお願いします", M},
		{"テストを追加して", C},
	} {
		if got := JudgeReply(c.body, config.DefaultCompletionKeywords(), botSaid); got != c.want {
			t.Errorf("JudgeReply(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}

// With completion_keywords: [] no reply ends the conversation, and the
// model is never asked.
func TestJudgeReplyWithoutKeywords(t *testing.T) {
	for _, body := range []string{"Thanks!", "Hmm.", "LGTM", "ありがとう"} {
		if got := JudgeReply(body, nil, nil); got != Continue {
			t.Errorf("JudgeReply(%q) without keywords = %v, want continue", body, got)
		}
	}
}

// The model's answer is read strictly: exactly one of the two verdicts, or
// not understood (and the reply then continues).
func TestParseVerdict(t *testing.T) {
	for _, c := range []struct {
		content string
		end, ok bool
	}{
		{`{"verdict": "end"}`, true, true},
		{" {\"verdict\":\"continue\"}\n", false, true},
		{`{"verdict": "END"}`, false, false},
		{`end`, false, false},
		{`END`, false, false},
		{`{"verdict": "end", "why": "thanks"}`, false, false},
		{`{"verdict": "end"} {"verdict": "continue"}`, false, false},
		{"```json\n{\"verdict\": \"end\"}\n```", false, false},
		{`The reply only thanks. {"verdict": "end"}`, false, false},
		{`{"verdict": true}`, false, false},
		{`{}`, false, false},
		{`null`, false, false},
		{`"end"`, false, false},
		{``, false, false},
		{`{"verdict": "end"`, false, false},
	} {
		if end, ok := ParseVerdict(c.content); end != c.end || ok != c.ok {
			t.Errorf("ParseVerdict(%q) = %v, %v; want %v, %v", c.content, end, ok, c.end, c.ok)
		}
	}
}

// No reply makes the judge panic, and a verdict is one of the three; the
// strict reader takes only what it writes back the same.
func FuzzJudgeReply(f *testing.F) {
	for _, s := range []string{"Thanks!", "Thanks, that looks right. One more thing: please keep `slugify`.", "> quoted\n\nok",
		"ありがとうございます。もう一つ、残してください。", "未完了です", "<!-- x --> LGTM", "On x wrote:\n> y", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		v := JudgeReply(body, config.DefaultCompletionKeywords(), botSaid)
		if v != Continue && v != End && v != Unsure {
			t.Fatalf("JudgeReply(%q) = %d", body, v)
		}
		if end, ok := ParseVerdict(body); ok && body != "" {
			again, ok2 := ParseVerdict(`{"verdict": "` + map[bool]string{true: "end", false: "continue"}[end] + `"}`)
			if !ok2 || again != end {
				t.Fatalf("ParseVerdict(%q) = %v but its verdict does not read back", body, end)
			}
		}
	})
}
