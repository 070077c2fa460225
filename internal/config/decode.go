package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// maxDepth bounds alias chains and nested merge keys.
const maxDepth = 32

// decoder walks the YAML tree into the Config structs by their yaml tags,
// expanding ${VAR} in scalars and collecting every problem instead of
// stopping at the first. Its messages name keys and kinds, never values.
type decoder struct {
	lookup   func(string) (string, bool)
	anchors  []*ast.AnchorNode
	problems Problems
	warnings []Warning
	lines    map[string]int // key path → line, to place later validation problems
	// empty are the variables, set to "" in the environment, that made
	// the value at a key path (without a default), to explain a problem
	// found there later.
	empty map[string][]string
	// template is set while decoding a field tagged "tasktemplate" (an MCP
	// server's command and env): its scalars become templates (see expand).
	template bool
}

func (d *decoder) problem(path string, n ast.Node, msg string) {
	d.problems = append(d.problems, Problem{Path: path, Msg: msg, Line: lineOf(n)})
}

// typeError reports that n, written at node at, is not what the key wants.
func (d *decoder) typeError(path string, at, n ast.Node, want string) {
	d.problem(path, at, fmt.Sprintf("expected %s, got %s", want, kindOf(n)))
}

// decode stores node n into v. A null node leaves v as it is, so defaults
// survive "key:" and "key: ~".
func (d *decoder) decode(path string, n ast.Node, v reflect.Value) {
	r := d.resolve(n)
	if r == nil || r.Type() == ast.NullType {
		return
	}
	switch v.Kind() {
	case reflect.Pointer: // an optional section: present once written
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(path, n, v.Elem())
	case reflect.Struct:
		d.decodeStruct(path, n, r, v)
	case reflect.Slice:
		d.decodeList(path, n, r, v, false)
	case reflect.Map:
		d.decodeMap(path, n, r, v)
	default:
		d.decodeScalar(path, n, r, v)
	}
}

type field struct {
	index        int
	scalarOrList bool // the "scalarorlist" tag option: a lone scalar is a one-element list
	template     bool // the "tasktemplate" tag option: task variables are kept (see expand)
}

func fieldsOf(t reflect.Type) (map[string]field, []string) {
	fields := make(map[string]field, t.NumField())
	var names []string
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		fields[name] = field{index: i, scalarOrList: opts == "scalarorlist", template: opts == "tasktemplate"}
		names = append(names, name)
	}
	return fields, names
}

func (d *decoder) decodeStruct(path string, at, n ast.Node, v reflect.Value) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.typeError(path, at, n, "a mapping")
		return
	}
	fields, names := fieldsOf(v.Type())
	candidates := append(names, futureKeysUnder(path)...) // for "did you mean"
	for _, e := range d.entries(path, m, 0) {
		key, ok := keyText(e.Key)
		kp := joinPath(path, key)
		switch f, known := fields[key]; {
		case !ok:
			d.problem(path, e.Key, "keys must be plain strings")
		case !known && notYetSupported[kp]:
			d.warnings = append(d.warnings, Warning{Path: kp, Msg: futureKeyMsg(kp), Line: lineOf(e.Key)})
		case !known:
			d.problem(kp, e.Key, unknownKeyMsg(key, candidates))
		default:
			d.lines[kp] = lineOf(e.Key)
			d.template = f.template
			if f.scalarOrList {
				d.decodeList(kp, e.Value, d.resolve(e.Value), v.Field(f.index), true)
			} else {
				d.decode(kp, e.Value, v.Field(f.index))
			}
			d.template = false
		}
	}
}

func (d *decoder) decodeList(path string, at, n ast.Node, v reflect.Value, scalarOK bool) {
	if n == nil || n.Type() == ast.NullType {
		return
	}
	elemType := v.Type().Elem()
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		if _, scalar := n.(ast.ScalarNode); !scalar || !scalarOK {
			d.typeError(path, at, n, "a list")
			return
		}
		elem := reflect.New(elemType).Elem()
		d.decode(path, at, elem)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), elem))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(seq.Values))
	for i, e := range seq.Values {
		ep := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ep] = lineOf(e)
		elem := reflect.New(elemType).Elem()
		d.decode(ep, e, elem)
		out = reflect.Append(out, elem)
	}
	v.Set(out)
}

func (d *decoder) decodeMap(path string, at, n ast.Node, v reflect.Value) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.typeError(path, at, n, "a mapping")
		return
	}
	out := reflect.MakeMap(v.Type())
	for _, e := range d.entries(path, m, 0) {
		key, ok := keyText(e.Key)
		if !ok {
			d.problem(path, e.Key, "keys must be plain strings")
			continue
		}
		kp := joinPath(path, key)
		d.lines[kp] = lineOf(e.Key)
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(kp, e.Value, elem)
		out.SetMapIndex(reflect.ValueOf(key), elem)
	}
	v.Set(out)
}

// decodeScalar stores a scalar into a string, int, float64 or bool. orig is
// the node as written (for its line), n the node after aliases.
func (d *decoder) decodeScalar(path string, orig, n ast.Node, v reflect.Value) {
	text, fromEnv, ok := d.scalarText(path, orig, n)
	if !ok {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Int:
		i, ok := intValue(n, text, fromEnv)
		switch {
		case !ok:
			d.typeError(path, orig, n, "an integer")
		case i < math.MinInt32 || i > math.MaxInt32:
			d.problem(path, orig, "integer out of range")
		default:
			v.SetInt(i)
		}
	case reflect.Int64: // ids given by a forge
		if i, ok := intValue(n, text, fromEnv); ok {
			v.SetInt(i)
		} else {
			d.typeError(path, orig, n, "an integer")
		}
	case reflect.Float64:
		f, ok := floatValue(n, text, fromEnv)
		if !ok {
			d.typeError(path, orig, n, "a number")
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, ok := boolValue(n, text, fromEnv)
		if !ok {
			d.typeError(path, orig, n, "true or false")
			return
		}
		v.SetBool(b)
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), path))
	}
}

// scalarText returns the text of scalar n, with ${VAR} expanded in strings
// (a template in template mode), and whether a reference was expanded. ok
// is false when a problem was recorded instead.
func (d *decoder) scalarText(path string, orig, n ast.Node) (text string, fromEnv, ok bool) {
	var s string
	switch v := n.(type) {
	case *ast.StringNode:
		s = v.Value
	case *ast.LiteralNode:
		s = v.Value.Value
	case ast.ScalarNode:
		return v.GetToken().Value, false, true
	default:
		d.typeError(path, orig, n, "a single value")
		return "", false, false
	}
	x, err := expand(s, d.lookup, d.template)
	if err != nil {
		d.problem(path, orig, err.Error())
		return "", false, false
	}
	before := len(d.problems)
	for _, name := range x.missing {
		d.problem(path, orig, "environment variable "+name+" is not set")
	}
	for _, msg := range bareProblems(path, s, x.bare) {
		d.problem(path, orig, msg)
	}
	if len(x.empty) > 0 {
		d.empty[path] = x.empty
	}
	if !d.template {
		for _, name := range x.task {
			d.problem(path, orig, "${"+name+"} is set only when an MCP server starts for a task: "+
				"it may appear in mcp_servers[].command and env of a server with scope: task")
		}
	}
	for _, name := range x.defaulted {
		d.problem(path, orig, "${"+name+"} takes no default: a task always sets it")
	}
	for _, name := range x.glued {
		d.problem(path, orig, "a $ right before ${"+name+"} cannot be told from the $${ escape: "+
			"a value of the environment ends in $ there")
	}
	return x.value, x.refs, len(d.problems) == before
}

func intValue(n ast.Node, text string, fromEnv bool) (int64, bool) {
	switch v := n.(type) {
	case *ast.IntegerNode:
		switch i := v.Value.(type) {
		case int64:
			return i, true
		case uint64:
			return int64(min(i, math.MaxInt64)), true
		}
	case *ast.StringNode, *ast.LiteralNode:
		if fromEnv {
			i, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			return i, err == nil
		}
	}
	return 0, false
}

func floatValue(n ast.Node, text string, fromEnv bool) (float64, bool) {
	switch v := n.(type) {
	case *ast.FloatNode:
		return v.Value, true
	case *ast.InfinityNode:
		return v.Value, true
	case *ast.NanNode:
		return math.NaN(), true
	case *ast.IntegerNode:
		i, ok := intValue(n, "", false)
		return float64(i), ok
	case *ast.StringNode, *ast.LiteralNode:
		if fromEnv {
			f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func boolValue(n ast.Node, text string, fromEnv bool) (bool, bool) {
	switch v := n.(type) {
	case *ast.BoolNode:
		return v.Value, true
	case *ast.StringNode, *ast.LiteralNode:
		if fromEnv {
			switch strings.TrimSpace(text) {
			case "true", "True", "TRUE":
				return true, true
			case "false", "False", "FALSE":
				return false, true
			}
		}
	}
	return false, false
}
