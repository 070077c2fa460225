package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The families whose calls are framed by special tokens, with JSON
// arguments: DeepSeek's <｜tool▁call▁begin｜>, Mistral's [TOOL_CALLS], Kimi
// K2's <|tool_call_begin|>, Llama's <|python_tag|> and gpt-oss Harmony's
// to=functions.NAME. A call is whole once its arguments object is.

// DeepSeek's tokens use fullwidth bars and "▁" between words; the R1
// distills also write "_", "\_" or a space there (llama.cpp accepts each).
const dsSep = `(?:▁|_|\\_| )`

var (
	deepSeekBegin = regexp.MustCompile(`<｜tool` + dsSep + `call` + dsSep + `begin｜>`)
	deepSeekSep   = regexp.MustCompile(`<｜tool` + dsSep + `sep｜>`)
	deepSeekEnd   = regexp.MustCompile(`^\s*<｜tool` + dsSep + `call` + dsSep + `end｜>`)
)

// deepSeekCalls reads DeepSeek's calls: V3 and R1 write
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>,
// V3.1 writes <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>;
// both inside <｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>.
func deepSeekCalls(text string) []markup {
	var out []markup
	begins := deepSeekBegin.FindAllStringIndex(text, -1)
	for n, b := range begins {
		limit := len(text)
		if n+1 < len(begins) {
			limit = begins[n+1][0]
		}
		m := markup{span: span{b[0], limit}}
		sep := deepSeekSep.FindStringIndex(text[b[1]:limit])
		if sep == nil {
			m.problem = "a DeepSeek tool call has no <｜tool▁sep｜>: it looks cut off; write the whole call"
			out = append(out, m)
			continue
		}
		head := strings.TrimSpace(text[b[1] : b[1]+sep[0]])
		at := b[1] + sep[1]
		name := head
		if first := strings.TrimLeft(text[at:limit], " \t\r\n"); head == "function" && !strings.HasPrefix(first, "{") {
			// V3 and R1: the name on the line after the separator.
			line, _, _ := strings.Cut(first, "\n")
			name = strings.TrimSpace(line)
			at = limit - len(first) + len(line)
		}
		raw, end, ok := valueAt(text[:limit], at, false)
		if !ok || !toolWord.MatchString(name) {
			m.problem = fmt.Sprintf("the DeepSeek call of %s has no whole JSON object of arguments", clip(oneLine(name), 60))
			out = append(out, m)
			continue
		}
		if e := deepSeekEnd.FindStringIndex(text[end:limit]); e != nil {
			end += e[1]
		}
		m.end = end
		m.calls = []rawCall{{name: name, args: json.RawMessage(raw)}}
		out = append(out, m)
	}
	return out
}

// mistralName is a function name after [TOOL_CALLS], with the optional
// [CALL_ID] of the v11 tokenizer and the [ARGS] token before the arguments.
var mistralName = regexp.MustCompile(`^\s*([A-Za-z0-9_.\-/]+)(?:\[CALL_ID\][A-Za-z0-9]*)?(?:\[ARGS\])?`)

// mistralCalls reads Mistral's calls: [TOOL_CALLS][{"name", "arguments"}, …]
// (Mistral 7B v0.3, Ministral, Mistral Small 3.1) and
// [TOOL_CALLS]NAME[ARGS]{…} (Devstral, Magistral, Mistral Small 3.2),
// several in a row, [CALL_ID]xxxxxxxxx optional before [ARGS].
func mistralCalls(text string) []markup {
	const token = "[TOOL_CALLS]"
	var out []markup
	for at := 0; ; {
		i := strings.Index(text[at:], token)
		if i < 0 {
			return out
		}
		start := at + i
		body := start + len(token)
		m := markup{span: span{start, len(text)}}
		trimmed := strings.TrimLeft(text[body:], " \t\r\n")
		switch {
		case strings.HasPrefix(trimmed, "["), strings.HasPrefix(trimmed, "{"):
			raw, end, ok := valueAt(text, body, true)
			if ok {
				m.end = end
				m.calls, ok = callList(raw)
			}
			if !ok {
				m.problem = `[TOOL_CALLS] is not followed by a whole list of {"name": ..., "arguments": {...}} calls`
			}
		default:
			loc := mistralName.FindStringSubmatchIndex(text[body:])
			raw, end, ok := "", 0, loc != nil
			if ok {
				raw, end, ok = valueAt(text, body+loc[1], false)
			}
			if !ok {
				m.problem = "[TOOL_CALLS] is not followed by a whole call (NAME[ARGS]{...})"
				break
			}
			m.end = end
			m.calls = []rawCall{{name: text[body+loc[2] : body+loc[3]], args: json.RawMessage(raw)}}
		}
		out = append(out, m)
		if m.problem != "" {
			return out
		}
		at = m.end
	}
}

// callList reads a JSON list of call objects (or one object).
func callList(raw string) ([]rawCall, bool) {
	objs := []json.RawMessage{json.RawMessage(raw)}
	if strings.HasPrefix(raw, "[") && json.Unmarshal([]byte(raw), &objs) != nil {
		return nil, false
	}
	var calls []rawCall
	for _, o := range objs {
		name, args, ok := callObject(string(o), true)
		if !ok {
			return nil, false
		}
		calls = append(calls, rawCall{name: name, args: args})
	}
	return calls, len(calls) > 0
}

var (
	kimiBegin = `<|tool_call_begin|>`
	kimiArgs  = `<|tool_call_argument_begin|>`
	kimiEnd   = regexp.MustCompile(`^\s*<\|tool_call_end\|>`)
	kimiIndex = regexp.MustCompile(`:[0-9]+$`)
)

// kimiCalls reads Kimi K2's calls:
// <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
// <|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>.
func kimiCalls(text string) []markup {
	var out []markup
	for at := 0; ; {
		i := strings.Index(text[at:], kimiBegin)
		if i < 0 {
			return out
		}
		start := at + i
		head := start + len(kimiBegin)
		limit := len(text)
		if j := strings.Index(text[head:], kimiBegin); j >= 0 {
			limit = head + j
		}
		m := markup{span: span{start, limit}}
		id, _, found := strings.Cut(text[head:limit], kimiArgs)
		name := kimiIndex.ReplaceAllString(strings.TrimSpace(id), "")
		raw, end, ok := "", 0, found && toolWord.MatchString(name)
		if ok {
			raw, end, ok = valueAt(text[:limit], head+len(id)+len(kimiArgs), false)
		}
		if !ok {
			m.problem = fmt.Sprintf("the Kimi call %s has no whole JSON object of arguments", clip(oneLine(id), 60))
			return append(out, m)
		}
		if e := kimiEnd.FindStringIndex(text[end:limit]); e != nil {
			end += e[1]
		}
		m.end = end
		m.calls = []rawCall{{name: name, args: json.RawMessage(raw)}}
		out = append(out, m)
		at = limit
	}
}

// Llama 3.1: <|python_tag|>{"name": …, "parameters": …}, several separated
// by ";"; Llama 4: <|python_start|>…<|python_end|>.
var pythonTag = regexp.MustCompile(`(?s)<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|$)|<\|python_start\|>(.*?)(?:<\|python_end\|>|$)`)

func pythonTagCalls(text string) []markup {
	var out []markup
	for _, loc := range pythonTag.FindAllStringSubmatchIndex(text, -1) {
		inner := loc[2:4]
		if inner[0] < 0 {
			inner = loc[4:6]
		}
		m := markup{span: span{loc[0], loc[1]}}
		objs := rawObjects(text[inner[0]:inner[1]])
		for _, raw := range objs {
			name, args, ok := callObject(raw, true)
			if !ok {
				objs = nil
				break
			}
			m.calls = append(m.calls, rawCall{name: name, args: args})
		}
		if len(objs) == 0 {
			m.calls, m.problem = nil, `the <|python_tag|> call holds no {"name": ..., "parameters": {...}} object`
		}
		out = append(out, m)
	}
	return out
}

// gpt-oss Harmony: … to=functions.NAME [<|constrain|>json]<|message|>{…}[<|call|>].
var (
	harmonyCall  = regexp.MustCompile(`to=functions\.([A-Za-z0-9_.\-/]+)(?:[^<]|<\|(?:channel|constrain)\|>)*?<\|message\|>`)
	harmonyFinal = regexp.MustCompile(`(?s)<\|channel\|>final<\|message\|>(.*?)(?:<\|end\|>|<\|return\|>|$)`)
	harmonyEnd   = regexp.MustCompile(`^\s*<\|call\|>`)
)

// harmonyMarkups reads each to=functions.NAME header, followed by
// <|message|> and the arguments object.
func harmonyMarkups(text string) []markup {
	var out []markup
	for _, loc := range harmonyCall.FindAllStringSubmatchIndex(text, -1) {
		name := text[loc[2]:loc[3]]
		m := markup{span: span{loc[0], len(text)}}
		raw, end, ok := valueAt(text, loc[1], false)
		if !ok {
			m.problem = fmt.Sprintf("the call of %s has no JSON object of arguments after <|message|>", name)
			return append(out, m)
		}
		if e := harmonyEnd.FindStringIndex(text[end:]); e != nil {
			end += e[1]
		}
		m.end = end
		m.calls = []rawCall{{name: name, args: json.RawMessage(raw)}}
		out = append(out, m)
	}
	return out
}

// harmonyCalls reads gpt-oss Harmony output: its calls, and as the comment
// the final channel's text, if any (the analysis channel is reasoning).
func (ts *Toolset) harmonyCalls(text string) textCalls {
	out := ts.resolveMarkup(harmonyMarkups(text))
	if m := harmonyFinal.FindStringSubmatch(text); m != nil && out.problem == "" {
		out.rest = cleanRest(m[1], nil)
	}
	return out
}
