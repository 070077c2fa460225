package report

import (
	"strings"
	"testing"
	"time"
)

// The announcement of an ending is one short comment in the configured
// language, starting with the words the author looks for.
func TestEnded(t *testing.T) {
	for _, c := range []struct {
		l      Lang
		reason string
		want   []string
	}{
		{English, EndedByReply, []string{"Marked done: reply or relabel to continue", "@alice's reply reads as thanks", "within 24 hours", "`coding agent`"}},
		{English, EndedByModel, []string{"Marked done: reply or relabel to continue", "the model read @alice's reply as an ending"}},
		{English, EndedByTimeout, []string{"Marked done", "no reply within 24 hours"}},
		{Japanese, EndedByReply, []string{"完了としました", "@alice さんの返信をお礼と判断しました", "24時間以内", "`coding agent`"}},
		{Japanese, EndedByModel, []string{"モデルが終了と判断しました"}},
		{Japanese, EndedByTimeout, []string{"24時間以内に返信がありませんでした"}},
	} {
		got, err := Ended(c.l, c.reason, "alice", 24*time.Hour, "coding agent")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %s: %q lacks %q", c.l, c.reason, got, w)
			}
		}
		if strings.Count(got, "\n") > 0 || len([]rune(got)) > 200 {
			t.Errorf("%s %s: not one short line: %q", c.l, c.reason, got)
		}
		if c.l == English && strings.ContainsFunc(got, func(r rune) bool { return r >= 0x3000 && r < 0xa000 }) {
			t.Errorf("English announcement holds Japanese: %q", got)
		}
	}
	for _, l := range []Lang{English, Japanese} {
		got, err := StoppedAwaiting(l, "coding agent")
		if err != nil || !strings.Contains(got, "`coding agent`") {
			t.Errorf("StoppedAwaiting(%s) = %q, %v", l, got, err)
		}
	}
}
