package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// MaxConfigBytes is the largest config file read: a config is a few
// kilobytes, and a --config naming a device or a log must not be read to
// its end.
const MaxConfigBytes = 1 << 20

// MaxNesting is how many levels of lists and mappings a config file may
// nest: a config is a few levels deep, and the YAML parser's time grows
// with the square of the depth (a 200 KB file of nested lists took it
// 35 s). A file nested deeper is refused before it is parsed.
const MaxNesting = 64

// readConfig reads the config file at path, at most MaxConfigBytes and one
// byte more (parse refuses a file that long).
func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
}

// Load reads the config file at path, expands ${VAR} from the process
// environment, applies defaults and validates. Problems come back as an error
// wrapping *Problems; warnings are returned either way.
func Load(path string) (*Config, []Warning, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config file: %w", err)
	}
	c, warnings, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, warnings, fmt.Errorf("loading config file %s:\n%w", path, err)
	}
	if c.File, err = filepath.Abs(path); err != nil {
		return nil, warnings, fmt.Errorf("loading config file %s: %w", path, err)
	}
	return c, warnings, nil
}

// LoadStore is Load for a command that only reads the state store
// (status): it needs no token, key or server in the environment. Problems are
// reported only in the keys the store's opening reads (state_dir, database,
// host_name, lease_seconds) and in the file as a whole (its YAML); elsewhere
// the values may be missing or wrong.
func LoadStore(path string) (*Config, []Warning, error) { return loadKeys(path, storeKey) }

// LoadServer is Load for `health`, which only probes the listener: it needs
// no token, key or service in the environment. Problems are reported only in
// the server section and in the file as a whole (its YAML).
func LoadServer(path string) (*Config, []Warning, error) { return loadKeys(path, serverKey) }

// loadKeys is Load counting only the problems at the key paths keep
// accepts.
func loadKeys(path string, keep func(path string) bool) (*Config, []Warning, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config file: %w", err)
	}
	c, warnings, err := parse(data, os.LookupEnv, keep, false)
	if err != nil {
		return nil, warnings, fmt.Errorf("loading config file %s:\n%w", path, err)
	}
	return c, warnings, nil
}

// serverKey reports whether a problem at path stops LoadServer.
func serverKey(path string) bool {
	return path == "" || path == "server" || strings.HasPrefix(path, "server.")
}

// storeKey reports whether a problem at path stops LoadStore.
func storeKey(path string) bool {
	for _, k := range []string{"", "state_dir", "database", "host_name", "lease_seconds"} {
		if path == k || strings.HasPrefix(path, k+".") {
			return true
		}
	}
	return false
}

// Parse is Load without reading the config file: lookupEnv resolves ${VAR}
// (nil: every variable is unset). The only files it reads are those that
// token_file and api_key_file name. On problems it returns a nil Config and
// *Problems holding all of them, sorted by path.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Config, []Warning, error) {
	return parse(data, lookupEnv, nil, false)
}

// Check is Load for `config check`: besides the file's problems it reports
// what this machine would refuse at start, as far as that can be told
// without creating anything (see hostProblems). Load leaves that to the
// start, where it is the command's error rather than the file's.
func Check(path string) (*Config, []Warning, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config file: %w", err)
	}
	c, warnings, err := parse(data, os.LookupEnv, nil, true)
	if err != nil {
		return nil, warnings, fmt.Errorf("loading config file %s:\n%w", path, err)
	}
	if c.File, err = filepath.Abs(path); err != nil {
		return nil, warnings, fmt.Errorf("loading config file %s: %w", path, err)
	}
	return c, warnings, nil
}

// parse is Parse counting only the problems at the key paths keep accepts
// (nil: all of them), and with host those of hostProblems.
func parse(data []byte, lookupEnv func(string) (string, bool), keep func(path string) bool, host bool) (*Config, []Warning, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	body, p := parseYAML(data)
	if p != nil {
		return nil, nil, Problems{*p}.err()
	}
	c := Default()
	d := &decoder{lookup: lookupEnv, lines: map[string]int{}, empty: map[string][]string{}}
	if body != nil {
		for _, a := range ast.Filter(ast.AnchorType, body) {
			d.anchors = append(d.anchors, a.(*ast.AnchorNode))
		}
		if _, ok := d.resolve(body).(*ast.MappingNode); !ok {
			return nil, nil, Problems{{Msg: "the top level must be a mapping of keys", Line: lineOf(body)}}.err()
		}
		d.decode("", body, reflect.ValueOf(c).Elem())
	}
	problems := slices.Concat(d.problems, d.settleTemplates(c))
	fileProblems := slices.Concat(c.readSecretFiles(), c.readAppKey())
	for _, p := range fileProblems {
		p.Line = d.lines[p.Path]
		problems = append(problems, p)
	}
	var invalid *Problems
	if errors.As(c.Validate(), &invalid) {
		for _, p := range *invalid {
			if coveredBy(d.problems, p.Path) || coveredBy(fileProblems, p.Path+"_file") {
				continue // already reported where the value was read
			}
			p.Line = d.lines[p.Path]
			problems = append(problems, p)
		}
	}
	if host {
		for _, p := range c.hostProblems() {
			if !coveredBy(problems, p.Path) {
				p.Line = d.lines[p.Path]
				problems = append(problems, p)
			}
		}
	}
	explainEmpty(problems, d.empty)
	if keep != nil {
		problems = slices.DeleteFunc(problems, func(p Problem) bool { return !keep(p.Path) })
	}
	if err := problems.err(); err != nil {
		return nil, d.warnings, err
	}
	for _, w := range c.Warnings() {
		w.Line = d.lines[w.Path]
		d.warnings = append(d.warnings, w)
	}
	return c, d.warnings, nil
}

// parseYAML returns the body of the single document in data (nil when the
// file is empty), or the Problem that stops decoding.
func parseYAML(data []byte) (ast.Node, *Problem) {
	if len(data) > MaxConfigBytes {
		return nil, &Problem{Msg: fmt.Sprintf("larger than %d bytes (1 MiB): a config file is a few kilobytes", MaxConfigBytes)}
	}
	tokens, p := tokenize(string(data))
	if p != nil {
		return nil, p
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, syntaxProblem(data, err)
	}
	var body ast.Node
	for i, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, &Problem{Msg: "a config file holds a single YAML document", Line: lineOf(f.Docs[i])}
		}
		body = doc.Body
	}
	return body, nil
}

// tokenize splits src into YAML tokens as the parser's own lexer does, and
// stops at the first token that opens a level past MaxNesting with the
// Problem that says where. The scanner's time grows with the length of the
// text, not its depth: a 200 KB file nested 100,000 levels deep is refused
// in about 40 ms (BenchmarkDeeplyNested), where the parser took 35 s.
func tokenize(src string) (token.Tokens, *Problem) {
	var (
		s      scanner.Scanner
		tokens token.Tokens
		n      nesting
		prev   *token.Token
	)
	s.Init(src)
	for {
		tks, err := s.Scan()
		if err == io.EOF {
			return tokens, nil
		}
		for _, tk := range tks {
			if level, at := n.opens(tk, prev); level > MaxNesting {
				return nil, &Problem{Msg: fmt.Sprintf("nested more than %d levels deep (a config is a few levels deep); the file is not read further",
					MaxNesting), Line: at.Line, Column: at.Column}
			}
			prev = tk
		}
		tokens.Add(tks...)
	}
}

// nesting follows how deep the tokens of a YAML text are: the flow
// collections ([ and {) open, and the columns of the block collections
// open, each deeper one further right.
type nesting struct {
	flow  int
	block []int
}

// opens returns the level of the collection tk opens (1 for the top
// level) and where it starts; level 0 when tk opens none. prev is the
// token before tk: a mapping value's key, whose column is the mapping's.
func (n *nesting) opens(tk, prev *token.Token) (level int, at *token.Position) {
	switch tk.Type {
	case token.SequenceStartType, token.MappingStartType:
		n.flow++
		return len(n.block) + n.flow, tk.Position
	case token.SequenceEndType, token.MappingEndType:
		n.flow = max(n.flow-1, 0)
	case token.SequenceEntryType, token.MappingKeyType:
		if n.flow == 0 {
			return n.blockAt(tk.Position.Column), tk.Position
		}
	case token.MappingValueType:
		if n.flow == 0 && prev != nil {
			return n.blockAt(prev.Position.Column), prev.Position
		}
	}
	return 0, nil
}

// blockAt is the level of a block collection whose entries start at col:
// the ones further right have ended, and one at the same column is the
// same collection.
func (n *nesting) blockAt(col int) int {
	for len(n.block) > 0 && n.block[len(n.block)-1] > col {
		n.block = n.block[:len(n.block)-1]
	}
	if len(n.block) == 0 || n.block[len(n.block)-1] < col {
		n.block = append(n.block, col)
	}
	return len(n.block)
}

// syntaxProblem turns a parser error into a Problem. The error's own text
// quotes the source, which may hold a secret, so only its short message and
// position are kept.
func syntaxProblem(data []byte, err error) *Problem {
	p := &Problem{Msg: "invalid YAML"}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return p
	}
	p.Msg += ": " + ye.GetMessage()
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		p.Line, p.Column = tk.Position.Line, tk.Position.Column
		lines := bytes.Split(data, []byte("\n"))
		if l := p.Line - 1; l >= 0 && l < len(lines) && bytes.Contains(lines[l], []byte("${")) &&
			bytes.ContainsAny(lines[l], "[{") {
			p.Msg += ` (inside [ ] or { }, quote a value holding ${...})`
		}
	}
	return p
}

// settleTemplates turns the templates decoded into the command and env of
// each MCP server that is not task-scoped back into their literal text: a
// task variable in one is a problem, since no task starts it.
func (d *decoder) settleTemplates(c *Config) Problems {
	var ps Problems
	settle := func(path, scope, v string) string {
		lit, vars := untemplate(v)
		if scope == "" || scope == ScopeProcess {
			for _, name := range vars {
				ps = append(ps, Problem{Path: path, Line: d.lines[path], Msg: "${" + name +
					"} is set only for a server with scope: task (this one's scope is process, shared by every task)"})
			}
		}
		return lit
	}
	for i := range c.MCPServers {
		s := &c.MCPServers[i]
		if s.PerTask() {
			continue
		}
		p := fmt.Sprintf("mcp_servers[%d]", i)
		for j, a := range s.Command {
			s.Command[j] = settle(fmt.Sprintf("%s.command[%d]", p, j), s.Scope, a)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			s.Env[k] = settle(p+".env."+k, s.Scope, s.Env[k])
		}
	}
	return ps
}

// explainEmpty prefixes each problem at a key path whose value came from
// variables set to "" in the environment (empty) with that fact: a token
// that is "required" although its variable is set is one exported empty.
func explainEmpty(ps Problems, empty map[string][]string) {
	for i, p := range ps {
		names := empty[p.Path]
		if len(names) == 0 || strings.HasPrefix(p.Msg, "environment variable") {
			continue
		}
		what := "environment variable " + names[0] + " is set but empty"
		if len(names) > 1 {
			what = "environment variables " + strings.Join(names, ", ") + " are set but empty"
		}
		ps[i].Msg = what + " (" + p.Msg + ")"
	}
}

// coveredBy reports whether a decoding problem is at path or above it (a
// problem of the file as a whole, path "", covers nothing).
func coveredBy(ps Problems, path string) bool {
	for _, p := range ps {
		if p.Path == "" {
			continue
		}
		if p.Path == path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}
