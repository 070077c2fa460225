package report

import (
	"fmt"
	"math"
	"time"
)

// Why a conversation ended, for Ended.
const (
	EndedByReply   = "reply"   // the author's reply was thanks or approval
	EndedByModel   = "model"   // the model read the author's reply as an ending
	EndedByTimeout = "timeout" // no reply within the window
)

// Ended is the one short comment that announces the end of a conversation
// (see worker.Conversation): why (EndedByReply, EndedByModel with the
// reply's author, EndedByTimeout), and that a reply within window, or the
// bot label, continues it.
func Ended(l Lang, reason, author string, window time.Duration, botLabel string) (string, error) {
	return render("conversation/"+string(l.norm())+"/ended", map[string]any{"Reason": reason, "Author": author,
		"Window": l.window(window), "BotLabel": botLabel})
}

// StoppedAwaiting is the comment posted when a task awaiting a reply is
// stopped (the stop command, or the stopped label added by hand).
func StoppedAwaiting(l Lang, botLabel string) (string, error) {
	return render("conversation/"+string(l.norm())+"/stopped", map[string]any{"BotLabel": botLabel})
}

// window says d in words: whole hours as hours, anything else as the
// planning reports write a duration.
func (l Lang) window(d time.Duration) string {
	h := d.Hours()
	if h < 1 || h != math.Trunc(h) {
		return l.duration(d)
	}
	if l.norm() == Japanese {
		return fmt.Sprintf("%d時間", int(h))
	}
	if h == 1 {
		return "1 hour"
	}
	return fmt.Sprintf("%d hours", int(h))
}
