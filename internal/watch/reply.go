package watch

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Verdict is what a reply to a task awaiting it asks for.
type Verdict int

const (
	Continue Verdict = iota // it asks for more work: a new round
	End                     // only thanks or approval: the conversation ends
	Unsure                  // neither plainly: the model is asked (AskReply)
)

func (v Verdict) String() string { return [...]string{"continue", "end", "ask the model"}[v] }

// JudgeReply judges a reply to the bot as a person would. A reply that asks
// for anything (a request word, a question, an imperative opening a
// clause, a negated keyword: "not done") continues, whatever thanks it
// also holds; a reply of thanks or approval (a completion keyword, an
// approval phrase) with little else ends; anything between is Unsure, for
// the model to decide. bot are the bot's own comments: quoted lines ("> …",
// "On … wrote:", a line repeating one of the bot's) are not the author's
// words. With no keywords, no reply ends the conversation.
func JudgeReply(body string, keywords, bot []string) Verdict {
	if len(keywords) == 0 {
		return Continue
	}
	text := ownWords(body, bot)
	if strings.TrimSpace(text) == "" {
		return Unsure
	}
	text = strings.ToLower(text)
	text = urls.ReplaceAllString(text, " link ")
	text = codeSpans.ReplaceAllString(text, " code ")
	if strings.ContainsAny(text, "?？") || jaQuestion.MatchString(text) {
		return Continue
	}
	// A courtesy that closes Japanese mail asks for nothing by itself.
	text = courtesy.ReplaceAllString(text, " . ")
	ending := false
	// Closing phrases and Japanese thanks for a deed first: their words
	// ("need", "修正して") are no request.
	for _, re := range []*regexp.Regexp{closers, jaThanksFor} {
		if re.MatchString(text) {
			ending = true
			text = re.ReplaceAllString(text, " . ")
		}
	}
	phrases := append(append([]string{}, keywords...), approvals...)
	// The longest first: "keep up the good work" before "good work".
	slices.SortStableFunc(phrases, func(a, b string) int { return len(b) - len(a) })
	text, found, denied := maskPhrases(text, phrases)
	ending = ending || found
	if denied || hasAny(text, strongEN, true) || hasAny(text, strongJA, false) || imperative(text) {
		return Continue
	}
	weak := hasAny(text, weakEN, true) || hasAny(text, weakJA, false)
	switch {
	case !ending && (weak || residue(text) > 3):
		return Continue
	case !ending:
		return Unsure // "Hmm.", "🚀": too little to tell
	case weak || residue(text) > 3:
		return Unsure
	}
	return End
}

var (
	urls       = regexp.MustCompile(`https?://\S+`)
	codeSpans  = regexp.MustCompile("`[^`\n]*`")
	jaQuestion = regexp.MustCompile(`(ますか|ませんか|でしょうか|ですか|かな)\s*(。|$|\n)`)
	// wrote is the line a mail client puts above what it quotes.
	wrote    = regexp.MustCompile(`(?i)^on .{4,200} wrote:\s*$`)
	comment  = regexp.MustCompile(`(?s)<!--.*?-->`)
	closers  = regexp.MustCompile(`\b(nothing (else|more)( needed)?|that'?s (all|it)|that is (all|it)|no (more|further)( changes)?( needed)?|no need( to [a-z]+)?|all (set|good)|no problems?|nothing wrong)\b|以上です|特に(ありません|ないです|なし)`)
	courtesy = regexp.MustCompile(`(どうぞ)?よろしくお願い(いた)?(します|致します|いたします)`)
	// jaThanksFor is thanks for something done: 修正ありがとう,
	// 対応してくれてありがとう, ご確認いただきありがとうございます.
	jaThanksFor = regexp.MustCompile(`(追加|修正|変更|削除|対応|実装|作業|確認|説明|提案|ご対応|ご確認)?(を)?(して|し)?(くれて|くださって|下さって|いただいて|頂いて|いただき|頂き|もらって)?(本当に|どうも)?(ありがとう|有難う|感謝)(ございます|ございました|です|しています)?`)
)

// approvals end a conversation as the keywords do (besides them).
var approvals = []string{"lgtm", "looks good", "looks great", "looks right", "looks perfect", "looks fine", "perfect",
	"great", "awesome", "excellent", "nice", "cool", "good job", "great job", "nice work", "great work", "good work",
	"well done", "keep up the good work", "it works", "works great", "works for me", "works", "ship it", "merged",
	"approved", "okay", "thx", "ty", "cheers", "👍", "🎉", "✅", "🙏", "❤️", "🚀", "💯",
	"助かりました", "助かります", "お疲れ様", "おつかれさま", "完璧", "問題ありません", "問題なし", "問題ないです",
	"大丈夫です", "いいですね", "良いですね", "素晴らしい", "確認しました", "マージしました", "バッチリ", "ばっちり", "十分です"}

// strongEN and strongJA ask for more work wherever they stand.
var (
	strongEN = []string{"please", "pls", "plz", "could you", "can you", "would you", "will you", "could we", "can we",
		"would it be possible", "also", "as well", "one more", "another thing", "in addition", "additionally", "instead",
		"should", "shouldn't", "need to", "needs to", "must", "have to", "has to", "i'd like", "i would like", "i want",
		"let's", "make sure", "don't forget", "do not forget", "when you are done", "when you're done", "once you",
		"after that", "next", "wrong", "not what i", "broken", "doesn't work", "does not work", "not working", "missing",
		"revert", "undo"}
	strongJA = []string{"ください", "下さい", "ほしい", "欲しい", "もらえ", "いただけ", "頂け", "くれませんか", "お願い",
		"もう一つ", "もうひとつ", "もう1つ", "もう一点", "ついでに", "それと", "あと、", "追加で", "次に", "次は",
		"終わったら", "完了したら", "できたら", "済んだら", "べき", "必要", "間違", "動かない", "動きません", "失敗"}
	weakEN = []string{"but", "however", "though", "although", "still", "yet", "except", "rather", "wish", "maybe",
		"perhaps", "might", "wonder", "error", "bug", "fail", "fails", "failing", "failed", "crash", "doesn't", "didn't",
		"isn't", "not"}
	weakJA = []string{"でも", "しかし", "ただ", "ですが", "ますが", "けど", "けれど", "まだ", "気になる", "思います", "かも",
		"たい", "問題が", "エラー", "バグ"}
)

// verbs open a clause that asks for something ("Add a test.").
var verbs = map[string]bool{"add": true, "remove": true, "delete": true, "rename": true, "change": true, "fix": true,
	"make": true, "keep": true, "update": true, "use": true, "move": true, "replace": true, "write": true, "create": true,
	"implement": true, "refactor": true, "split": true, "include": true, "drop": true, "support": true, "handle": true,
	"document": true, "put": true, "set": true, "try": true, "switch": true, "convert": true, "bump": true,
	"extract": true, "clean": true, "improve": true, "translate": true, "sort": true, "avoid": true, "ensure": true,
	"show": true, "print": true, "return": true, "raise": true, "wrap": true, "run": true, "squash": true, "let": true,
	"do": true, "don't": true, "go": true}

// leading words a clause may open with before its verb ("OK, now add…").
var leading = map[string]bool{"ok": true, "okay": true, "now": true, "then": true, "and": true, "so": true,
	"just": true, "oh": true, "lastly": true, "finally": true, "kindly": true, "maybe": true}

// ownWords is body without what it quotes: "> " lines, a mail client's
// "On … wrote:" line, lines that repeat one of the bot's comments, and
// HTML comments.
func ownWords(body string, bot []string) string {
	said := map[string]bool{}
	for _, b := range bot {
		for _, l := range strings.Split(b, "\n") {
			if l = normLine(l); utf8.RuneCountInString(l) >= 10 {
				said[l] = true
			}
		}
	}
	var keep []string
	for _, l := range strings.Split(comment.ReplaceAllString(body, " "), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, ">") || wrote.MatchString(t) || said[normLine(t)] {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func normLine(l string) string { return strings.ToLower(strings.Join(strings.Fields(l), " ")) }

// maskPhrases replaces every occurrence of the phrases in text (lower
// case; whole words for words written with spaces) with a clause break.
// found: one was there and not negated; denied: one was negated ("not
// done", "未完了", "完了していない").
func maskPhrases(text string, phrases []string) (string, bool, bool) {
	found, denied := false, false
	for _, k := range phrases {
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" {
			continue
		}
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], k)
			if i < 0 {
				break
			}
			start, end := from+i, from+i+len(k)
			if wordy(k) && !(boundary(text, start, true) && boundary(text, end, false)) {
				from = start + 1
				continue
			}
			if negated(text[:start], text[end:]) {
				denied = true
				from = end
				continue
			}
			found = true
			text = text[:start] + " . " + text[end:]
			from = start + 3
		}
	}
	return text, found, denied
}

// hasAny reports whether text holds one of the markers, as whole words when
// words says so.
func hasAny(text string, markers []string, words bool) bool {
	for _, m := range markers {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], m)
			if i < 0 {
				break
			}
			start, end := from+i, from+i+len(m)
			if !words || (boundary(text, start, true) && boundary(text, end, false)) {
				return true
			}
			from = start + 1
		}
	}
	return false
}

// clauses splits text at sentence and clause punctuation and line breaks.
func clauses(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(".,;:!\n—。、！，", r) })
}

// imperative reports whether a clause opens with a verb (English) or ends
// with a te-form request (Japanese: 追加して, 直して).
func imperative(text string) bool {
	for _, c := range clauses(text) {
		words := strings.Fields(c)
		for len(words) > 1 && leading[words[0]] {
			words = words[1:]
		}
		if len(words) > 1 && verbs[words[0]] {
			return true
		}
		c = strings.TrimRight(strings.TrimSpace(c), "ねよ〜ー")
		if strings.HasSuffix(c, "して") || strings.HasSuffix(c, "て") && hasJapanese(c) {
			return true
		}
	}
	return false
}

// filler are words that say nothing beyond the thanks they come with.
var filler = map[string]bool{"a": true, "an": true, "the": true, "this": true, "that": true, "it": true, "its": true,
	"it's": true, "is": true, "was": true, "for": true, "to": true, "of": true, "and": true, "so": true, "very": true,
	"much": true, "lot": true, "lots": true, "really": true, "again": true, "all": true, "everything": true, "your": true,
	"you": true, "guys": true, "team": true, "everyone": true, "quick": true, "fast": true, "help": true, "work": true,
	"job": true, "fix": true, "fixes": true, "change": true, "changes": true, "pr": true, "mr": true, "patch": true,
	"update": true, "i": true, "me": true, "my": true, "we": true, "now": true, "just": true, "too": true, "as": true,
	"well": true, "good": true, "super": true, "looks": true, "seems": true, "right": true, "correct": true,
	"fine": true, "exactly": true, "what": true, "needed": true, "wanted": true, "expected": true, "in": true, "on": true,
	"with": true, "by": true, "indeed": true, "one": true, "again!": true}

// jaFiller are Japanese words and particles that say nothing beyond the
// thanks they come with.
var jaFiller = regexp.MustCompile(`ございます|ございました|いたします|です|ます|ました|本当に|どうも|大変|とても|すごく|今回|早速|迅速な|ご対応|対応|修正|作業|皆さん|さん|様|[はのもをがにでとしてねよ]`)

// residue counts what text says besides thanks: English words that are no
// filler (a mention is none), and Japanese letters past the filler.
func residue(text string) int {
	n := 0
	ja := 0
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '@' && r != '-'
	}) {
		switch {
		case strings.HasPrefix(w, "@"), filler[w]:
		case hasJapanese(w):
			for _, r := range jaFiller.ReplaceAllString(w, "") {
				if unicode.IsLetter(r) {
					ja++
				}
			}
		default:
			n++
		}
	}
	return n + ja
}

func hasJapanese(s string) bool {
	for _, r := range s {
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) {
			return true
		}
	}
	return false
}
