package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/sanitize"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// A server's question during a call (toolhost.Asker) is answered from what
// the run was told, or put off: the server hears "cancel", the call's
// result is dropped, and the run ends Asked with the call still in hand.
// The worker posts the question and the task awaits a reply; the resumed
// run reads the reply into the question's fields (answer) and makes the
// call again, which the server asks again and now gets the answer.

// Question is a server's question the run put off to the people on the
// task.
type Question struct {
	toolhost.Question
	// Mark is the newest comment id when it was asked (or when a reply was
	// last read): a reply is a comment after it.
	Mark int64 `json:"mark"`
	// Unread says why the last reply could not be read as an answer ("" for
	// none): the question is asked again, saying so.
	Unread string `json:"unread,omitempty"`
}

// Answered is an answer the people on the task gave to a question.
type Answered struct {
	Key    string          `json:"key"` // toolhost.Question.Key
	Answer toolhost.Answer `json:"answer"`
	By     []string        `json:"by,omitempty"` // who replied
	// Said is the replies as written, shown to the model with the answer:
	// what else they say is the model's to hear.
	Said string `json:"said,omitempty"`
}

// Asking reads a checkpoint's data: the question its run put off to the
// people on the task, if it ended so.
func Asking(data []byte) (*Question, bool) {
	var cp struct {
		Asked *Question `json:"asked"`
	}
	if json.Unmarshal(data, &cp) != nil || cp.Asked == nil {
		return nil, false
	}
	return cp.Asked, true
}

// asker answers one call's questions: from the answers given, else put off
// (once: a second question in the call is put off too, and asked when the
// call is made again), else declined when nobody can be asked.
type asker struct {
	mu      sync.Mutex
	answers []Answered
	can     bool
	asked   *toolhost.Question
	used    []Answered
}

func (a *asker) Ask(_ context.Context, q toolhost.Question) toolhost.Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := q.Key()
	if i := slices.IndexFunc(a.answers, func(x Answered) bool { return x.Key == k }); i >= 0 {
		a.used = append(a.used, a.answers[i])
		return a.answers[i].Answer
	}
	if !a.can {
		return toolhost.Answer{Action: toolhost.Decline}
	}
	if a.asked == nil {
		a.asked = &q
	}
	return toolhost.Answer{Action: toolhost.Cancel}
}

// result is what the asker saw during the call: the question put off, and
// the answers used.
func (a *asker) result() (*toolhost.Question, []Answered) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked, a.used
}

// answeredNote tells the model, before the call's result, what the server
// asked and what the people on the task answered.
func answeredNote(used []Answered) string {
	var b strings.Builder
	for _, u := range used {
		who := "the people on the task"
		if len(u.By) > 0 {
			who = "@" + strings.Join(u.By, ", @")
		}
		content, _ := json.Marshal(u.Answer.Content)
		if u.Answer.Action != toolhost.Accept {
			content = []byte(u.Answer.Action)
		}
		fmt.Fprintf(&b, "[The server asked a question during this call; %s answered on the task: %s]\n", who, content)
		if u.Said != "" {
			fmt.Fprintf(&b, "%s\n", FenceCut("reply by "+who, u.Said, MaxCommentChars))
		}
	}
	return b.String()
}

// CommentName is the name of the comment that puts q to the people on the
// task (the last part of its key, engine.Keys): a reply is a comment
// written after that comment.
func (q *Question) CommentName() string { return fmt.Sprintf("asked-%d", q.Mark) }

// Replies are the comments of in that answer q: those written after the
// comment that asked it (found by its key's name, which report.Poster
// writes in the comment's hidden key line, "…/asked-N -->" or, for a
// comment in parts, "…/asked-N#2 -->"), by people the run hears; posted
// is false when that comment is not on the task.
func (q *Question) Replies(comments []task.Comment, bot string) (replies []task.Comment, posted bool) {
	var after int64
	name := "/" + q.CommentName()
	for _, c := range comments {
		if strings.EqualFold(c.Author, bot) && (strings.Contains(c.Body, name+" -->") || strings.Contains(c.Body, name+"#")) {
			if !posted || c.ID < after {
				after = c.ID
			}
			posted = true
		}
	}
	if !posted {
		return nil, false
	}
	for _, c := range comments {
		if c.ID > after && !c.System && !strings.EqualFold(c.Author, bot) && strings.TrimSpace(c.Body) != "" {
			replies = append(replies, c)
		}
	}
	return replies, true
}

// answer reads the replies to the question the run put off, on a resume:
// the comments the run hears written after the question was posted. With
// an answer, the call in hand is made again and gets it. Without the
// question on the task (the process stopped before posting it, or the
// task was started again another way) the call is made again and the
// server asks again; a question asked again after a reply that could not
// be read stays, for the run to end asking it (and posting it, with the
// reason). A reply that cannot be read keeps the question, and the run
// ends asking it again with the reason.
func (r *Run) answer(ctx context.Context) error {
	st := r.st
	q := st.Asked
	replies, posted := q.Replies(r.in.Comments, r.in.BotName)
	if !posted && q.Unread != "" {
		return nil
	}
	if len(replies) == 0 {
		r.log.Info("no reply to the server's question; making the call again", "server", q.Server, "posted", posted)
		st.Asked = nil
		return r.save(ctx)
	}
	var texts, by []string
	var newest int64
	for _, c := range replies {
		texts = append(texts, c.Body)
		if !slices.Contains(by, c.Author) {
			by = append(by, c.Author)
		}
		newest = max(newest, c.ID)
	}
	text := strings.Join(texts, "\n\n")
	ans, why := ReadAnswer(q.Question, text, len(replies) == 1)
	if why != "" {
		var err error
		if ans, why, err = r.askAnswer(ctx, q.Question, text, why); err != nil {
			return err
		}
	}
	if why != "" {
		r.log.Warn("the reply to the server's question could not be read; asking again", "server", q.Server, "reason", why)
		// Asked again in a comment of its own (named by the new mark):
		// the replies to read are those after it.
		q.Mark, q.Unread = newest, why
		return r.save(ctx)
	}
	st.Mark = max(st.Mark, newest) // shown to the model with the answer (answeredNote)
	r.log.Info("the server's question was answered on the task", "server", q.Server, "action", ans.Action, "by", by)
	content, _ := json.Marshal(ans.Content)
	r.record(ctx, store.Event{Kind: store.EventQuestion, Title: fmt.Sprintf("%s's question answered (%s) by @%s", q.Server, ans.Action,
		strings.Join(by, ", @")), Text: string(content)})
	st.Answers = append(st.Answers, Answered{Key: q.Key(), Answer: ans, By: by, Said: text})
	st.Asked = nil
	return r.save(ctx)
}

// answerSystem is the instruction of the request that reads a prose reply.
const answerSystem = `A tool server asked the people on an issue a question, and one of them replied. Read the reply into the fields the server asked for.
Answer with one JSON object and nothing else:
{"action": "accept", "content": {...}} with the fields the reply gives, each of the type its schema says;
{"action": "decline"} when the person refuses to answer.
Use only what the reply says: leave out a field it does not give.`

// answerTokens bounds that request's reply.
const answerTokens = 512

// askAnswer has the model read a reply ReadAnswer could not (why): one
// request, counted as the task's. The reply is untrusted text, fenced; the
// model's answer is checked against the question's schema as a reply read
// without it is.
func (r *Run) askAnswer(ctx context.Context, q toolhost.Question, reply, why string) (toolhost.Answer, string, error) {
	if r.e.o.LLM == nil {
		return toolhost.Answer{}, why, nil
	}
	prompt := fmt.Sprintf("The server's question:\n%s\n\nThe fields it asks for (a JSON schema):\n%s\n\n%s",
		sanitize.Fence("the question", q.Message), q.Schema, sanitize.Fence("the reply", reply))
	resp, err := r.e.o.LLM.Chat(ctx, llm.Request{MaxTokens: answerTokens, Messages: []llm.Message{
		{Role: llm.System, Content: answerSystem}, {Role: llm.User, Content: prompt}}})
	if errors.Is(err, llm.ErrEmptyReply) {
		return toolhost.Answer{}, why, nil
	}
	if err != nil {
		return toolhost.Answer{}, "", fmt.Errorf("asking the model to read the reply to %s's question: %w", q.Server, err)
	}
	st := r.st
	st.Calls++
	st.TokensIn += resp.Usage.InputTokens
	st.TokensOut += resp.Usage.OutputTokens
	if err := r.e.o.State.AddCounters(ctx, r.in.Task.Ref, store.Counters{LLMCalls: 1,
		TokensIn: resp.Usage.InputTokens, TokensOut: resp.Usage.OutputTokens}); err != nil {
		return toolhost.Answer{}, "", fmt.Errorf("recording model usage of %s: %w", r.in.Task.Ref, err)
	}
	obj, ok := firstObject(StripThink(resp.Message.Content))
	if !ok {
		return toolhost.Answer{}, why, nil
	}
	var a struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if json.Unmarshal(obj, &a) != nil {
		return toolhost.Answer{}, why, nil
	}
	switch a.Action {
	case toolhost.Decline:
		return toolhost.Answer{Action: toolhost.Decline}, "", nil
	case toolhost.Accept:
		ans, why := checkAnswer(q, coerceAll(q.Fields(), a.Content))
		return ans, why, nil
	}
	return toolhost.Answer{}, why, nil
}

// ReadAnswer reads a reply into the question's fields without a model: a
// JSON object in it; else "field: value" lines (a field named by its name
// or its title); else, for a question of one field (or one required
// field) that is not free text (choices, a number, yes or no), the whole
// reply when it is one comment (alone) of one line. "decline" alone
// declines. Values are read as
// their field's type (a choice by its value or its title; yes/no for a
// boolean; a list for several choices); a field left out takes its
// default. why says what is missing or wrong when the result does not
// match the schema.
func ReadAnswer(q toolhost.Question, reply string, alone bool) (toolhost.Answer, string) {
	text := strings.TrimSpace(reply)
	if w := strings.ToLower(strings.Trim(text, " .!/")); w == "decline" {
		return toolhost.Answer{Action: toolhost.Decline}, ""
	}
	fields := q.Fields()
	values := map[string]any{}
	if obj, ok := firstObject(text); ok {
		_ = json.Unmarshal(obj, &values)
	}
	if len(values) == 0 {
		values = lines(fields, text)
	}
	if len(values) == 0 && alone && !strings.Contains(text, "\n") {
		// Free text would take any prose whole ("Thanks, staging"): the
		// model reads that.
		if i := slices.IndexFunc(fields, func(f toolhost.Field) bool { return f.Name == single(fields) }); i >= 0 &&
			(len(fields[i].Choices) > 0 || fields[i].Type != "string") {
			values[fields[i].Name] = strings.Trim(text, "`\"' ")
		}
	}
	return checkAnswer(q, coerceAll(fields, values))
}

// checkAnswer fills in the defaults and checks content against the schema.
func checkAnswer(q toolhost.Question, content map[string]any) (toolhost.Answer, string) {
	for _, f := range q.Fields() {
		if _, ok := content[f.Name]; !ok && f.Default != nil {
			content[f.Name] = f.Default
		}
	}
	if len(q.Schema) > 0 {
		var s jsonschema.Schema
		if err := json.Unmarshal(q.Schema, &s); err != nil {
			return toolhost.Answer{}, "the server's schema cannot be read: " + err.Error()
		}
		res, err := s.Resolve(nil)
		if err != nil {
			return toolhost.Answer{}, "the server's schema cannot be read: " + err.Error()
		}
		if err := res.Validate(content); err != nil {
			return toolhost.Answer{}, sanitize.Line(err.Error())
		}
	}
	return toolhost.Answer{Action: toolhost.Accept, Content: content}, ""
}

// firstObject is the first JSON object in text (in a code fence or not).
func firstObject(text string) (json.RawMessage, bool) {
	for i := strings.IndexByte(text, '{'); i >= 0; {
		var raw json.RawMessage
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&raw) == nil {
			return raw, true
		}
		j := strings.IndexByte(text[i+1:], '{')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return nil, false
}

// lines reads "field: value" (or "field = value") lines, a field named by
// its name or title in any case, with list marks and emphasis around it.
func lines(fields []toolhost.Field, text string) map[string]any {
	out := map[string]any{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimLeft(strings.TrimSpace(line), "-*•> ")
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			k, v, ok = strings.Cut(line, "=")
		}
		if !ok {
			continue
		}
		k = norm(k)
		for _, f := range fields {
			if k == norm(f.Name) || (f.Title != "" && k == norm(f.Title)) {
				out[f.Name] = strings.Trim(strings.TrimSpace(v), "*`\"'")
			}
		}
	}
	return out
}

func norm(s string) string {
	return strings.NewReplacer(" ", "", "_", "", "-", "", "*", "", "`", "").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// single is the field a whole reply answers: the only field, or the only
// required one; "" when there are several.
func single(fields []toolhost.Field) string {
	if len(fields) == 1 {
		return fields[0].Name
	}
	var req []string
	for _, f := range fields {
		if f.Required {
			req = append(req, f.Name)
		}
	}
	if len(req) == 1 {
		return req[0]
	}
	return ""
}

// coerceAll reads each value given as text as its field's type; a value
// that cannot be read stays as it was, for the schema check to name.
func coerceAll(fields []toolhost.Field, values map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range values {
		out[k] = v
		i := slices.IndexFunc(fields, func(f toolhost.Field) bool { return f.Name == k })
		if i < 0 {
			continue
		}
		if s, ok := v.(string); ok {
			out[k] = coerce(fields[i], s)
		}
	}
	return out
}

func coerce(f toolhost.Field, s string) any {
	s = strings.TrimSpace(s)
	switch f.Type {
	case "integer":
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	case "number":
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return n
		}
	case "boolean":
		switch strings.ToLower(strings.Trim(s, ".! ")) {
		case "yes", "y", "true", "ok", "agree", "agreed", "confirm", "confirmed", "1":
			return true
		case "no", "n", "false", "disagree", "0":
			return false
		}
	case "array":
		var out []any
		for _, part := range strings.FieldsFunc(strings.ReplaceAll(s, " and ", ","), func(r rune) bool { return r == ',' || r == '\n' || r == ';' }) {
			out = append(out, choose(f.Choices, strings.TrimSpace(part)))
		}
		return out
	default:
		return choose(f.Choices, s)
	}
	return s
}

// choose is the choice s names by its value or title, or s.
func choose(cs []toolhost.Choice, s string) string {
	for _, c := range cs {
		if strings.EqualFold(c.Value, s) || (c.Title != "" && strings.EqualFold(c.Title, s)) {
			return c.Value
		}
	}
	return s
}
