package config

import (
	"errors"
	"slices"
	"strings"
)

// errBadReference reports a "${" without a valid "NAME}" or "NAME:-default}"
// after it. Its text never includes the value.
var errBadReference = errors.New(`malformed ${...} reference (want ${NAME} or ${NAME:-default}; write $${ for a literal "${")`)

// TaskVariables are the variables a task sets when a task-scoped MCP server
// starts for it: ${WORKSPACE} (the task's checkout), ${TASK_REF} and
// ${BRANCH}. They are not read from the environment: in
// mcp_servers[].command and env they are kept for the server's start
// (toolhost.TaskVars expands them), and anywhere else they are a problem.
var TaskVariables = []string{"WORKSPACE", "TASK_REF", "BRANCH"}

// expansion is the result of expanding one scalar.
type expansion struct {
	value   string   // the expanded text, or the template (expand's template mode)
	refs    bool     // at least one ${...} reference was expanded
	missing []string // unset variables referenced without a default
	// task are the task variables referenced; defaulted, those given a
	// default (a task always sets them); glued, those right after a "$"
	// that a template cannot tell from the $${ escape.
	task, defaulted, glued []string
	// bare are the names written $NAME, without braces (see bareProblems);
	// empty, the variables set in the environment to "" and referenced
	// without a default.
	bare, empty []string
}

// expand replaces ${NAME} and ${NAME:-default} in s using lookup, $${
// with a literal "${" and $$NAME with a literal "$NAME". ":-" takes the
// default when NAME is unset or empty. A $NAME without braces is kept as
// written and reported in bare.
//
// The task variables are not looked up. In template mode (an MCP server's
// command and env) the result is a template for toolhost.TaskVars: each
// task variable is kept as ${NAME}, and every literal "${" (an escape, or
// one inside a value of the environment) is written $${. Otherwise a task
// variable expands to nothing and is reported in task.
func expand(s string, lookup func(string) (string, bool), template bool) (expansion, error) {
	var (
		b   strings.Builder
		lit strings.Builder // literal text not yet written to b
		res expansion
	)
	flush := func() {
		text := lit.String()
		if template {
			text = strings.ReplaceAll(text, "${", "$${")
		}
		b.WriteString(text)
		lit.Reset()
	}
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			lit.WriteString(s)
			break
		}
		lit.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"):
			lit.WriteString("${")
			s = s[3:]
		case strings.HasPrefix(s, "$$") && len(s) > 2 && nameStart(s[2]):
			lit.WriteByte('$') // the escape of a literal $NAME
			s = s[2:]
			n := nameLen(s[1:])
			lit.WriteString(s[:1+n])
			s = s[1+n:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return expansion{}, errBadReference
			}
			name, def, hasDef := strings.Cut(s[2:end], ":-")
			if !validEnvName(name) {
				return expansion{}, errBadReference
			}
			s = s[end+1:]
			res.refs = true
			if slices.Contains(TaskVariables, name) {
				res.task = append(res.task, name)
				if hasDef {
					res.defaulted = append(res.defaulted, name)
				}
				if template {
					if strings.HasSuffix(lit.String(), "$") {
						res.glued = append(res.glued, name)
					}
					flush()
					b.WriteString("${" + name + "}")
				}
				continue
			}
			val, ok := lookup(name)
			switch {
			case hasDef && val == "":
				val = def
			case !ok:
				res.missing = append(res.missing, name)
			case val == "" && !hasDef:
				res.empty = append(res.empty, name)
			}
			lit.WriteString(val)
		case len(s) > 1 && nameStart(s[1]):
			n := nameLen(s[1:])
			res.bare = append(res.bare, s[1:1+n])
			lit.WriteString(s[:1+n])
			s = s[1+n:]
		default:
			lit.WriteByte('$')
			s = s[1:]
		}
	}
	flush()
	res.value = b.String()
	return res, nil
}

// untemplate reads a template that expand wrote: the text it stands for with
// the task variables left as ${NAME}, and the task variables it holds.
func untemplate(s string) (string, []string) {
	var (
		b    strings.Builder
		vars []string
	)
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), vars
		}
		b.WriteString(s[:i])
		s = s[i:]
		if strings.HasPrefix(s, "$${") {
			b.WriteString("${")
			s = s[3:]
			continue
		}
		if end := strings.IndexByte(s, '}'); strings.HasPrefix(s, "${") && end > 0 && slices.Contains(TaskVariables, s[2:end]) {
			vars = append(vars, s[2:end])
		}
		b.WriteByte('$')
		s = s[1:]
	}
}

// nameStart reports whether c may begin an environment variable's name.
func nameStart(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

// nameLen is the length of the environment variable's name that s begins
// with ([A-Za-z_][A-Za-z0-9_]*), 0 when there is none.
func nameLen(s string) int {
	for i := range len(s) {
		if c := s[i]; !nameStart(c) && (c < '0' || c > '9' || i == 0) {
			return i
		}
	}
	return len(s)
}

// upperName reports whether name has the shape of environment variables
// by convention: upper-case letters, digits and underscores.
func upperName(name string) bool {
	return strings.IndexFunc(name, func(r rune) bool {
		return r != '_' && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	}) < 0
}

// freeText lists the values where a $NAME written inside longer text is
// not taken for a forgotten ${NAME}: an MCP server's command (its argv may
// be a shell script, whose own variables are written so), the checks and
// the setup (shell command lines), the system prompts and the completion
// keywords (prose). A whole value $NAME is a problem
// there too.
func freeText(path string) bool {
	_, field, _ := strings.Cut(path, "].")
	switch {
	case strings.HasPrefix(path, "mcp_servers[") &&
		(strings.HasPrefix(field, "command[") || field == "command" || field == "system_prompt"):
		return true
	case strings.HasPrefix(path, "conversation.completion_keywords"):
		return true
	case strings.HasPrefix(path, "workspace.checks["), strings.HasPrefix(path, "sandbox.setup["):
		return true // shell command lines, like a server's command
	}
	return false
}

// bareProblems are the messages for the names a value (as written, s)
// holds as $NAME without braces, where they are taken for a forgotten
// ${NAME}: a value that is $NAME and nothing else, whatever the case of
// NAME; inside longer text, an upper-case NAME (the convention for
// environment variables), except in freeText values. $$NAME writes a
// literal $NAME.
func bareProblems(path, s string, bare []string) []string {
	var msgs []string
	whole := strings.TrimSpace(s)
	for _, name := range bare {
		if whole == "$"+name || (upperName(name) && !freeText(path)) {
			msgs = append(msgs, "$"+name+" is not expanded: write ${"+name+"} to take it from the environment"+
				" (or $$"+name+" for a literal $"+name+")")
		}
	}
	return msgs
}

// validEnvName reports whether name is [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
