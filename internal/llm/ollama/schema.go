package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ollama/ollama/api"
)

// Ollama's tool types hold a subset of JSON Schema: type, description,
// enum, properties, required, items and anyOf. toParameters maps a full
// schema onto them as faithfully as they allow:
//   - property order is kept (Ollama renders tools into the prompt);
//   - local $ref (any JSON pointer into the schema) and allOf are inlined,
//     recursion stopping after maxRefDepth expansions;
//   - oneOf becomes anyOf and const becomes a one-value enum;
//   - constraints the types cannot hold (format, default, bounds, pattern,
//     additionalProperties, ...) are appended to the description, so the
//     model still reads them.
const (
	maxRefDepth   = 5   // nested $ref expansions along one path
	maxExpansions = 200 // $ref expansions in one schema, against blow-up
)

// hintKeywords are the constraints appended to a description, in order.
var hintKeywords = []string{
	"format", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
	"additionalProperties", "examples",
}

// toParameters converts a tool's JSON Schema; empty means no arguments.
func toParameters(raw json.RawMessage) (api.ToolFunctionParameters, error) {
	params := api.ToolFunctionParameters{Type: "object", Properties: api.NewToolPropertiesMap()}
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return params, nil
	}
	root, err := decodeOrdered(raw)
	if err != nil {
		return params, fmt.Errorf("decoding parameters schema: %w", err)
	}
	obj, ok := root.(*object)
	if !ok {
		return params, errors.New("parameters schema is not a JSON object")
	}
	n := normalizer{root: obj}
	top, depth := n.expand(obj, 0)
	if p, ok := top.get("properties").(*object); ok {
		for _, k := range p.keys {
			params.Properties.Set(k, n.property(p.vals[k], depth))
		}
	}
	params.Required = stringList(top.get("required"))
	return params, nil
}

type normalizer struct {
	root       *object
	expansions int
}

// property converts one subschema. Boolean schemas (true: anything) give
// an empty property.
func (n *normalizer) property(v any, depth int) api.ToolProperty {
	o, ok := v.(*object)
	if !ok {
		return api.ToolProperty{}
	}
	o, depth = n.expand(o, depth)
	p := api.ToolProperty{
		Type:        api.PropertyType(stringList(o.get("type"))),
		Description: describe(o),
		Required:    stringList(o.get("required")),
	}
	if e, ok := o.get("enum").([]any); ok {
		p.Enum = e
	} else if c, ok := o.lookup("const"); ok {
		p.Enum = []any{c}
	}
	if props, ok := o.get("properties").(*object); ok {
		p.Properties = api.NewToolPropertiesMap()
		for _, k := range props.keys {
			p.Properties.Set(k, n.property(props.vals[k], depth))
		}
	}
	switch items := o.get("items").(type) {
	case *object:
		p.Items = n.property(items, depth)
	case []any: // tuple form
		tuple := make([]api.ToolProperty, 0, len(items))
		for _, it := range items {
			tuple = append(tuple, n.property(it, depth))
		}
		p.Items = tuple
	case bool:
		p.Items = items
	}
	alts, ok := o.get("anyOf").([]any)
	if !ok {
		alts, _ = o.get("oneOf").([]any)
	}
	for _, a := range alts {
		p.AnyOf = append(p.AnyOf, n.property(a, depth))
	}
	return p
}

// expand inlines $ref and allOf: the node's own keywords win, then those of
// the referenced schema, then those of each allOf part; properties and
// required lists are merged. depth counts the $ref expansions on the path
// to o; expand returns it as grown by the expansions it made.
func (n *normalizer) expand(o *object, depth int) (*object, int) {
	ref, hasRef := o.get("$ref").(string)
	parts, hasAll := o.get("allOf").([]any)
	if !hasRef && !hasAll {
		return o, depth
	}
	out := newObject()
	for _, k := range o.keys {
		if k != "$ref" && k != "allOf" {
			out.set(k, o.vals[k])
		}
	}
	reached := depth
	if hasRef {
		target, ok := n.resolve(ref)
		switch {
		case !ok:
			addNote(out, "schema "+ref)
		case depth >= maxRefDepth || n.expansions >= maxExpansions:
			addNote(out, "recursive: see "+ref)
		default:
			n.expansions++
			t, d := n.expand(target, depth+1)
			merge(out, t)
			reached = max(reached, d)
		}
	}
	for _, part := range parts {
		if po, ok := part.(*object); ok {
			t, d := n.expand(po, depth)
			merge(out, t)
			reached = max(reached, d)
		}
	}
	return out, reached
}

// resolve follows a local JSON pointer reference such as "#/$defs/Path".
func (n *normalizer) resolve(ref string) (*object, bool) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	var cur any = n.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		o, ok := cur.(*object)
		if !ok {
			return nil, false
		}
		if cur, ok = o.lookup(tok); !ok {
			return nil, false
		}
	}
	o, ok := cur.(*object)
	return o, ok
}

// merge adds src's keywords missing from dst, uniting properties and
// required.
func merge(dst, src *object) {
	for _, k := range src.keys {
		v := src.vals[k]
		cur, exists := dst.lookup(k)
		switch {
		case !exists:
			dst.set(k, v)
		case k == "properties":
			co, ok1 := cur.(*object)
			so, ok2 := v.(*object)
			if ok1 && ok2 {
				united := newObject()
				for _, pk := range co.keys {
					united.set(pk, co.vals[pk])
				}
				for _, pk := range so.keys {
					if _, ok := united.lookup(pk); !ok {
						united.set(pk, so.vals[pk])
					}
				}
				dst.set(k, united)
			}
		case k == "required":
			req := stringList(cur)
			for _, r := range stringList(v) {
				if !contains(req, r) {
					req = append(req, r)
				}
			}
			all := make([]any, len(req))
			for i, r := range req {
				all[i] = r
			}
			dst.set(k, all)
		}
	}
}

// describe is the description followed by the constraints Ollama's types
// cannot hold, e.g. "Port to use (minimum: 1; maximum: 65535)".
func describe(o *object) string {
	desc, _ := o.get("description").(string)
	var hints []string
	for _, k := range hintKeywords {
		v, ok := o.lookup(k)
		if !ok {
			continue
		}
		if b, isBool := v.(bool); k == "additionalProperties" && isBool && b {
			continue // the default: says nothing
		}
		text, err := json.Marshal(v)
		if err != nil {
			continue
		}
		hints = append(hints, k+": "+string(text))
	}
	if note, ok := o.get(noteKey).(string); ok {
		hints = append(hints, note)
	}
	if len(hints) == 0 {
		return desc
	}
	h := "(" + strings.Join(hints, "; ") + ")"
	if desc == "" {
		return h
	}
	return desc + " " + h
}

// noteKey carries expand's remarks to describe; it cannot clash with a
// schema keyword.
const noteKey = "\x00note"

func addNote(o *object, note string) { o.set(noteKey, note) }

// stringList reads a string or an array of strings.
func stringList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// object is a JSON object that remembers its key order.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) lookup(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *object) get(k string) any { return o.vals[k] }

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// MarshalJSON writes the keys in order (enum and default values may be
// objects).
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered decodes JSON into *object, []any, string, json.Number,
// bool and nil values.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := newObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(kt.(string), v) // object keys are always strings
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}
