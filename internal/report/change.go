package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// FileStatus is what a change did to a file.
type FileStatus string

// The statuses of FileChange.
const (
	FileAdded    FileStatus = "added"
	FileModified FileStatus = "modified"
	FileDeleted  FileStatus = "deleted"
	FileRenamed  FileStatus = "renamed"
)

// FileChange is one file a change or a round touched, as git's diff sees
// it.
type FileChange struct {
	Path           string
	From           string // a renamed file's old path
	Status         FileStatus
	Added, Deleted int  // lines
	Binary         bool // no line counts
}

// Why is what a change answers: the issue it closes (Closes, in the forge's
// notation: "#12"), its title and its body, quoted briefly. Closes "" is a
// pull or merge request task, asked for on the change itself.
type Why struct {
	Closes, Title, Body string
}

// Round is what one round of a task added to its change: the commits it
// pushed (Commits, oldest first; Head is the last), its commit subject,
// what it did (the planning steps, the model's closing words), the files
// those commits changed and what ran.
type Round struct {
	Head        string
	Commits     []string // short ids
	Subject     string
	Steps       []string
	Summary     string
	Files       []FileChange
	Checks, Ran []Command
}

// ChangeBody is what the daemon writes in a pull or merge request's
// description: why, what the change as a whole does (Files: its base to
// its head) and, when this round pushed commits, its round.
type ChangeBody struct {
	Kind  string // "pull request" or "merge request"
	Why   Why
	Files []FileChange
	Round *Round // nil: no new round
}

// The daemon's part of a description lies between blockStart and
// blockEnd; each round's section starts with its mark and the last ends at
// roundsEnd. Text outside the block is the change author's and is kept.
const (
	blockStart = "<!-- coding-agent:change -->"
	blockEnd   = "<!-- /coding-agent:change -->"
	roundsEnd  = "<!-- /coding-agent:rounds -->"
)

var roundMark = regexp.MustCompile(`(?m)^<!-- coding-agent:round n=(\d+) head=([0-9a-f]{4,64}) -->$`)

// maxListed bounds the files a list shows; maxBody the description
// (GitHub refuses a body over 65536 characters).
const (
	maxListed = 100
	maxBody   = 60000
)

// section is one round's section as the description holds it.
type section struct {
	n    int
	head string
	text string
}

// ChangeBody writes the description of a pull or merge request from prev,
// its description now ("" for a new one): the daemon's block is rewritten
// (why, what changed) with the rounds it held kept as written and b.Round
// added after them, unless a round already ends at its head; the text
// around the block stays. Text from the forge and the model is cleaned
// (HTML comments, hidden characters), so none can forge a mark; redact
// the result before it goes out.
func (l Lang) ChangeBody(prev string, b ChangeBody) (string, error) {
	before, block, after := splitBlock(prev)
	rounds := sections(block)
	if r := b.Round; r != nil && !hasHead(rounds, r.Head) {
		n := 1
		if len(rounds) > 0 {
			n = rounds[len(rounds)-1].n + 1
		}
		text, err := l.round(n, *r)
		if err != nil {
			return "", err
		}
		rounds = append(rounds, section{n: n, head: r.Head, text: text})
	}
	for {
		body, err := l.compose(before, after, rounds, b)
		if err != nil || utf8.RuneCountInString(body) <= maxBody {
			return body, err
		}
		if !collapseOldest(l, rounds) {
			return body, nil
		}
	}
}

func (l Lang) compose(before, after string, rounds []section, b ChangeBody) (string, error) {
	texts := make([]string, len(rounds))
	for i, s := range rounds {
		texts[i] = s.text
	}
	block, err := render("change/"+string(l.norm()), map[string]any{
		"Closes": b.Why.Closes, "Title": sanitize.Line(b.Why.Title), "Quote": quote(b.Why.Body), "Kind": b.Kind,
		"Stat": stat(b.Files), "Files": listed(b.Files), "Rounds": texts,
	})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.Join([]string{strings.TrimSpace(before), block, strings.TrimSpace(after)}, "\n\n")), nil
}

// round renders round n's section.
func (l Lang) round(n int, r Round) (string, error) {
	evidence := ""
	if len(r.Checks)+len(r.Ran) > 0 {
		var err error
		if evidence, err = Evidence(l, r.Checks, r.Ran); err != nil {
			return "", err
		}
	}
	return render("change/"+string(l.norm())+"/round", map[string]any{
		"N": n, "Head": r.Head, "Subject": sanitize.Line(r.Subject), "Steps": cleanLines(r.Steps),
		"Summary": strings.TrimSpace(sanitize.Clean(r.Summary)), "Commits": r.Commits, "Stat": stat(r.Files),
		"Files": listed(r.Files), "Evidence": evidence,
	})
}

// collapseOldest shortens the oldest round not yet shortened to its mark
// and heading; false when none is left.
func collapseOldest(l Lang, rounds []section) bool {
	for i, s := range rounds {
		if strings.Count(s.text, "\n") <= 3 {
			continue
		}
		heading := ""
		for _, line := range strings.Split(s.text, "\n") {
			if strings.HasPrefix(line, "#### ") {
				heading = line
				break
			}
		}
		text, err := render("change/"+string(l.norm())+"/collapsed", map[string]any{"N": s.n, "Head": s.head, "Heading": heading})
		if err != nil {
			return false
		}
		rounds[i].text = text
		return true
	}
	return false
}

// LastRoundHead is the head the newest round of a description ends at; ""
// when it holds none.
func LastRoundHead(body string) string {
	_, block, _ := splitBlock(body)
	if s := sections(block); len(s) > 0 {
		return s[len(s)-1].head
	}
	return ""
}

func splitBlock(body string) (before, block, after string) {
	i := strings.Index(body, blockStart)
	if i < 0 {
		return body, "", ""
	}
	j := strings.Index(body[i:], blockEnd)
	if j < 0 {
		return body[:i], body[i:], ""
	}
	j += i + len(blockEnd)
	return body[:i], body[i:j], body[j:]
}

func sections(block string) []section {
	if k := strings.Index(block, roundsEnd); k >= 0 {
		block = block[:k]
	}
	marks := roundMark.FindAllStringSubmatchIndex(block, -1)
	out := make([]section, 0, len(marks))
	for i, m := range marks {
		end := len(block)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		n, _ := strconv.Atoi(block[m[2]:m[3]])
		out = append(out, section{n: n, head: block[m[4]:m[5]], text: strings.TrimSpace(block[m[0]:end])})
	}
	return out
}

func hasHead(rounds []section, head string) bool {
	for _, s := range rounds {
		if s.head == head {
			return true
		}
	}
	return false
}

// diffstat is what a list of files adds up to.
type diffstat struct{ Files, Added, Deleted int }

func stat(files []FileChange) diffstat {
	s := diffstat{Files: len(files)}
	for _, f := range files {
		s.Added += f.Added
		s.Deleted += f.Deleted
	}
	return s
}

// fileList is a list of files as shown: at most maxListed, and how many
// more.
type fileList struct {
	List []FileChange
	More int
}

func listed(files []FileChange) fileList {
	if len(files) <= maxListed {
		return fileList{List: files}
	}
	return fileList{List: files[:maxListed], More: len(files) - maxListed}
}

func cleanLines(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if l = sanitize.Line(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// maxQuote bounds the excerpt of an issue a description quotes.
const maxQuote = 300

// mentionOrRef is a mention (@user) or a reference (#12, group/app!7) in
// quoted text: shown as code, it neither notifies anyone nor links, nor
// closes an issue through the change.
var mentionOrRef = regexp.MustCompile(`@\w+(?:[.-]\w+)*|[\w./-]*[#!]\d+`)

// quote is the first paragraph of an issue's body, cleaned and cut, as a
// Markdown quote; "" for an empty body.
func quote(body string) string {
	text := strings.TrimSpace(sanitize.Clean(body))
	if i := strings.Index(text, "\n\n"); i >= 0 {
		text = strings.TrimSpace(text[:i])
	}
	if text == "" {
		return ""
	}
	if rs := []rune(text); len(rs) > maxQuote {
		text = strings.TrimRightFunc(string(rs[:maxQuote]), unicode.IsSpace) + "…"
	}
	text = mentionOrRef.ReplaceAllStringFunc(text, CodeSpan)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// Commit is what a round's commit message is made of: the files it
// changes, what the model said it did (Steps, planning mode's completed
// actions; Summary, the plain loop's closing words, or planning mode's
// verification note), the title of the task (never its subject), its
// reference in the forge's notation and its address.
type Commit struct {
	Files     []FileChange
	Steps     []string
	Summary   string
	Title     string
	Refs, URL string
}

// maxSubject is the longest subject taken from the model's words.
const maxSubject = 72

// CommitMessage is a round's commit message: a subject that says what the
// round changed, then its steps, the model's words, its files and the
// task's reference.
func (l Lang) CommitMessage(c Commit) (string, error) {
	return render("commit/"+string(l.norm()), map[string]any{
		"Subject": l.Subject(c), "Steps": cleanLines(c.Steps), "Summary": strings.TrimSpace(sanitize.Clean(c.Summary)),
		"Files": listed(c.Files), "Refs": c.Refs, "URL": c.URL,
	})
}

// Subject is what a round's commit subject says: the model's own account
// of the round (planning mode's one completed action; the plain loop's
// first sentence) when it names a file the round changed and fits on a
// subject line, and is not the task's title; else the files themselves
// ("Add hello.txt and bye.txt").
func (l Lang) Subject(c Commit) string {
	said := ""
	switch {
	case len(c.Steps) == 1:
		said = stepText(c.Steps[0])
	case len(c.Steps) == 0:
		said = firstSentence(c.Summary)
	}
	if said != "" && utf8.RuneCountInString(said) <= maxSubject && namesAFile(said, c.Files) &&
		!strings.EqualFold(said, sanitize.Line(c.Title)) {
		return said
	}
	return l.filesSubject(c.Files)
}

// stepText is a planning step ("a1: wrote hello.py") without its action
// id, its first letter upper case.
func stepText(s string) string {
	s = sanitize.Line(s)
	if id, rest, ok := strings.Cut(s, ": "); ok && id != "" && !strings.ContainsAny(id, " \t") && len(id) <= 20 {
		s = rest
	}
	return upperFirst(strings.TrimRight(s, ".。"))
}

// firstSentence is the first sentence of text, on one line, without its
// full stop.
func firstSentence(text string) string {
	text = strings.TrimSpace(sanitize.Clean(text))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	text = strings.TrimLeft(text, "#*->` ")
	for _, end := range []string{". ", "! ", "? ", "。"} {
		if i := strings.Index(text, end); i >= 0 {
			text = text[:i]
		}
	}
	return upperFirst(strings.TrimRight(sanitize.Line(text), ".。!"))
}

// upperFirst upper-cases the first letter of s unless its first word is
// a name (a path, a file, an identifier: "hello.txt", "go_test").
func upperFirst(s string) string {
	first, _, _ := strings.Cut(s, " ")
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || strings.ContainsAny(first, "./_`") {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// namesAFile reports whether s names one of the files by its base name.
func namesAFile(s string, files []FileChange) bool {
	s = strings.ToLower(s)
	for _, f := range files {
		base := f.Path[strings.LastIndexByte(f.Path, '/')+1:]
		if base != "" && strings.Contains(s, strings.ToLower(base)) {
			return true
		}
	}
	return false
}

// subjectWords are how a subject names files in a language.
type subjectWords struct {
	verbs      map[FileStatus]string
	mixed      string
	and, comma string
	join       func(verb, names string) string
	rename     func(from, to string) string
	more       func(names string, n int) string
}

var subjectVocab = map[Lang]subjectWords{
	English: {
		verbs: map[FileStatus]string{FileAdded: "Add", FileModified: "Update", FileDeleted: "Delete", FileRenamed: "Rename"},
		mixed: "Change", and: " and ", comma: ", ",
		join:   func(verb, names string) string { return verb + " " + names },
		rename: func(from, to string) string { return "Rename " + from + " to " + to },
		more:   func(names string, n int) string { return fmt.Sprintf("%s and %d more files", names, n) },
	},
	Japanese: {
		verbs: map[FileStatus]string{FileAdded: "追加", FileModified: "更新", FileDeleted: "削除", FileRenamed: "名前変更"},
		mixed: "変更", and: " と ", comma: "、",
		join:   func(verb, names string) string { return names + " を" + verb },
		rename: func(from, to string) string { return from + " を " + to + " に名前変更" },
		more:   func(names string, n int) string { return fmt.Sprintf("%s ほか %d ファイル", names, n) },
	},
}

// filesSubject names the files and what was done to them: up to three by
// name, the others counted.
func (l Lang) filesSubject(files []FileChange) string {
	w := subjectVocab[l.norm()]
	if len(files) == 0 {
		return w.mixed
	}
	if len(files) == 1 && files[0].Status == FileRenamed {
		return w.rename(files[0].From, files[0].Path)
	}
	verb := w.verbs[files[0].Status]
	names := make([]string, 0, 3)
	for i, f := range files {
		if w.verbs[f.Status] != verb {
			verb = w.mixed
		}
		if i < 3 {
			names = append(names, f.Path[strings.LastIndexByte(f.Path, '/')+1:])
		}
	}
	if verb == "" {
		verb = w.mixed
	}
	var list string
	switch {
	case len(files) > 3:
		list = w.more(strings.Join(names[:2], w.comma), len(files)-2)
	case len(names) == 1:
		list = names[0]
	default:
		list = strings.Join(names[:len(names)-1], w.comma) + w.and + names[len(names)-1]
	}
	return w.join(verb, list)
}
