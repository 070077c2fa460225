package report_test

import (
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/report"
)

// The task's page, when there is one, is linked from the closing comment
// of either loop and from the failure comment, in both languages.
func TestCommentsLinkTheTaskPage(t *testing.T) {
	const page = "https://agent.example.com/tasks/github/acme/app/7"
	for _, l := range []report.Lang{report.English, report.Japanese} {
		closing, err1 := l.Closing(report.Closing{Comment: "Done.", Page: page})
		final, err2 := l.Final(report.Final{Succeeded: true, Page: page})
		failed, err3 := l.Failed("r", "F", "B", "", "", page)
		without, err4 := l.Closing(report.Closing{Comment: "Done."})
		for i, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				t.Fatalf("%s %d: %v", l, i, err)
			}
		}
		for name, body := range map[string]string{"closing": closing, "final": final, "failed": failed} {
			if !strings.Contains(body, page) {
				t.Errorf("%s %s comment does not link the page:\n%s", l, name, body)
			}
		}
		if strings.Contains(without, "🔎") {
			t.Errorf("%s closing comment without a page:\n%s", l, without)
		}
	}
}
