package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pythonic call lists, as Llama 3.2 and 4 write them under their pythonic
// templates (and some Granite and Phi templates):
// [echo(text="hi"), other(n=2)]. Read only when the whole reply is such a
// list and every name is a tool's, with literal keyword arguments only
// (strings, numbers, True/False/None, lists, dicts): anything else (a
// variable, an expression, a call inside) is not a call.

// pythonicCalls reads text as a pythonic call list.
func (ts *Toolset) pythonicCalls(text string) ([]ToolCall, bool) {
	s := strings.TrimSpace(text)
	if body, ok := strings.CutPrefix(s, "```"); ok {
		line, rest, _ := strings.Cut(body, "\n")
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(line, "python"), "py")) != "" {
			return nil, false
		}
		s, ok = strings.CutSuffix(strings.TrimSpace(rest), "```")
		if !ok {
			return nil, false
		}
		s = strings.TrimSpace(s)
	}
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	p := &pyParser{s: s}
	raws, ok := p.callList()
	if !ok {
		return nil, false
	}
	var calls []ToolCall
	for _, c := range raws {
		full, _, problem := ts.resolve(c.name)
		if problem != "" {
			return nil, false
		}
		calls = append(calls, ToolCall{Tool: full, Args: c.args})
	}
	return calls, true
}

// pyParser reads the literal subset of Python a call list may hold.
type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

// eat consumes c after white space.
func (p *pyParser) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// callList reads [call, …] and nothing after it.
func (p *pyParser) callList() ([]rawCall, bool) {
	if !p.eat('[') {
		return nil, false
	}
	var calls []rawCall
	for {
		c, ok := p.call()
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		if p.eat(',') {
			continue
		}
		if !p.eat(']') {
			return nil, false
		}
		p.space()
		return calls, p.i == len(p.s)
	}
}

// call reads name(key=value, …).
func (p *pyParser) call() (rawCall, bool) {
	name := p.ident(true)
	if name == "" || !p.eat('(') {
		return rawCall{}, false
	}
	var b strings.Builder
	b.WriteByte('{')
	var keys []string
	for n := 0; !p.eat(')'); n++ {
		if n > 0 && !p.eat(',') {
			return rawCall{}, false
		}
		if n > 0 && p.eat(')') {
			break // a trailing comma
		}
		key := p.ident(false)
		if key == "" || !p.eat('=') {
			return rawCall{}, false
		}
		for _, k := range keys {
			if k == key {
				return rawCall{}, false
			}
		}
		keys = append(keys, key)
		v, ok := p.value(0)
		if !ok {
			return rawCall{}, false
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return rawCall{name: name, args: json.RawMessage(b.String())}, true
}

// ident reads a Python identifier; dotted, a function's name may carry a
// module (functions.echo).
func (p *pyParser) ident(dotted bool) string {
	p.space()
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || p.i > start && (c >= '0' && c <= '9' || dotted && c == '.') {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// maxPyDepth bounds how deep lists and dicts nest.
const maxPyDepth = 32

// value reads a literal as JSON.
func (p *pyParser) value(depth int) (json.RawMessage, bool) {
	if depth > maxPyDepth {
		return nil, false
	}
	p.space()
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		b, _ := json.Marshal(s)
		return b, true
	case c == '[':
		p.i++
		return p.items(']', depth, func() (json.RawMessage, bool) { return p.value(depth + 1) })
	case c == '{':
		p.i++
		return p.items('}', depth, func() (json.RawMessage, bool) {
			p.space()
			if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\'') {
				return nil, false
			}
			k, ok := p.str()
			if !ok || !p.eat(':') {
				return nil, false
			}
			v, ok := p.value(depth + 1)
			if !ok {
				return nil, false
			}
			kb, _ := json.Marshal(k)
			return append(append(kb, ':'), v...), true
		})
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	switch p.ident(false) {
	case "True":
		return json.RawMessage("true"), true
	case "False":
		return json.RawMessage("false"), true
	case "None":
		return json.RawMessage("null"), true
	}
	return nil, false
}

// items reads elements up to close, as a JSON list or object.
func (p *pyParser) items(close byte, depth int, elem func() (json.RawMessage, bool)) (json.RawMessage, bool) {
	open := map[byte]byte{']': '[', '}': '{'}[close]
	out := []byte{open}
	for n := 0; !p.eat(close); n++ {
		if n > 0 && !p.eat(',') {
			return nil, false
		}
		if n > 0 && p.eat(close) {
			break
		}
		v, ok := elem()
		if !ok {
			return nil, false
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	return append(out, close), true
}

// number reads an integer or a float.
func (p *pyParser) number() (json.RawMessage, bool) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.s) && strings.IndexByte("0123456789.eE+-_", p.s[p.i]) >= 0 {
		if (p.s[p.i] == '+' || p.s[p.i] == '-') && p.s[p.i-1] != 'e' && p.s[p.i-1] != 'E' {
			break
		}
		p.i++
	}
	lit := strings.ReplaceAll(p.s[start:p.i], "_", "")
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return json.RawMessage(strconv.FormatInt(n, 10)), true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return nil, false
	}
	b, err := json.Marshal(f)
	return b, err == nil
}

// str reads a quoted string with Python's common escapes.
func (p *pyParser) str() (string, bool) {
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), true
		case c == '\n':
			return "", false
		case c != '\\':
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			b.WriteRune(r)
			p.i += size
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'x', 'u':
			n := map[byte]int{'x': 2, 'u': 4}[e]
			if p.i+n > len(p.s) {
				return "", false
			}
			v, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
			if err != nil {
				return "", false
			}
			b.WriteRune(rune(v))
			p.i += n
		default:
			b.WriteByte('\\') // Python keeps an unknown escape as it is
			b.WriteByte(e)
		}
	}
	return "", false
}
