package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/task"
)

// numericKey is a number of the config: its key path and the field.
type numericKey struct {
	path  string
	field func(c *Config) reflect.Value
}

// numericKeys walks Config by its yaml tags and returns every int, int64
// and float64 key (in lists and maps there are none).
func numericKeys() []numericKey {
	var out []numericKey
	var walk func(path string, t reflect.Type, get func(c *Config) reflect.Value)
	walk = func(path string, t reflect.Type, get func(c *Config) reflect.Value) {
		switch t.Kind() {
		case reflect.Int, reflect.Int64, reflect.Float64:
			out = append(out, numericKey{path, get})
		case reflect.Pointer:
			walk(path, t.Elem(), func(c *Config) reflect.Value {
				v := get(c)
				if v.IsNil() {
					v.Set(reflect.New(t.Elem()))
				}
				return v.Elem()
			})
		case reflect.Struct:
			for i := range t.NumField() {
				name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
				if name == "" || name == "-" {
					continue
				}
				p := name
				if path != "" {
					p = path + "." + name
				}
				walk(p, t.Field(i).Type, func(c *Config) reflect.Value { return get(c).Field(i) })
			}
		}
	}
	walk("", reflect.TypeFor[Config](), func(c *Config) reflect.Value { return reflect.ValueOf(c).Elem() })
	return out
}

// identifiers are the numeric keys that name something rather than count
// or measure it: any value the forge gives is theirs.
var identifiers = map[string]bool{"github.app.app_id": true, "github.app.installation_id": true}

// configFor is a valid config in which the section of path is the one in
// use, so that Validate checks it.
func configFor(path string) *Config {
	c := Default()
	c.TaskSource, c.LLM.Provider = task.GitHub, ProviderOpenAI
	c.GitHub.Token, c.GitHub.Repositories = "t", []string{"acme/app"}
	c.GitLab.Token, c.GitLab.Projects = "t", []string{"acme/app"}
	c.LLM.OpenAI.APIKey, c.LLM.OpenAI.Model = "k", "m"
	c.LLM.LMStudio.Model, c.LLM.Ollama.Model = "m", "m"
	switch {
	case strings.HasPrefix(path, "gitlab."):
		c.TaskSource = task.GitLab
	case strings.HasPrefix(path, "llm.lmstudio."):
		c.LLM.Provider = ProviderLMStudio
	case strings.HasPrefix(path, "llm.ollama."):
		c.LLM.Provider = ProviderOllama
	case strings.HasPrefix(path, "queue.rabbitmq."):
		c.Queue.Type = QueueRabbitMQ
	}
	return c
}

// upperBound reads the largest value allowed from a problem's message:
// "from 1 to 256", "between 0.1 and 0.95", "at most 8760".
var upperBound = regexp.MustCompile(`(?:\bto|\band|at most) ([0-9]+(?:\.[0-9]+)?)\b`)

func problemAt(c *Config, path string) (Problem, bool) {
	var k checker
	if err := c.Validate(); err != nil {
		k.ps = *err.(*Problems)
	}
	for _, p := range k.ps {
		if p.Path == path {
			return p, true
		}
	}
	return Problem{}, false
}

func set(v reflect.Value, x float64) {
	if v.Kind() == reflect.Float64 {
		v.SetFloat(x)
	} else {
		v.SetInt(int64(x))
	}
}

// Every number of the config has an upper bound, and the problem a value
// past it makes gives the allowed range: workers: 1000000000 is refused
// with "from 1 to 256", not accepted to start a billion goroutines. The
// bound in the message is the true one: it is accepted, and one more is
// not. The decoder takes integers up to 2^31-1, which is tried too.
func TestEveryNumberHasARange(t *testing.T) {
	keys := numericKeys()
	if len(keys) < 30 {
		t.Fatalf("found %d numeric keys; the walk is broken", len(keys))
	}
	for _, key := range keys {
		if identifiers[key.path] {
			continue
		}
		t.Run(key.path, func(t *testing.T) {
			if p, ok := problemAt(configFor(key.path), key.path); ok {
				t.Fatalf("the default is refused: %s", p)
			}
			c := configFor(key.path)
			set(key.field(c), math.MaxInt32)
			p, ok := problemAt(c, key.path)
			if !ok {
				t.Fatalf("%d is accepted", math.MaxInt32)
			}
			m := upperBound.FindStringSubmatch(p.Msg)
			if m == nil {
				t.Fatalf("the problem does not give the range: %q", p.Msg)
			}
			hi, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			c = configFor(key.path)
			set(key.field(c), hi)
			if p, ok := problemAt(c, key.path); ok {
				t.Errorf("the upper bound %s is refused: %s", m[1], p)
			}
			step := 1.0
			if key.field(c).Kind() == reflect.Float64 {
				step = hi / 100
			}
			set(key.field(c), hi+step)
			if _, ok := problemAt(c, key.path); !ok {
				t.Errorf("%v, past the upper bound %s, is accepted", hi+step, m[1])
			}
		})
	}
}

// A value under the range gets the same message, range and all.
func TestTooSmallGivesTheRange(t *testing.T) {
	for _, path := range []string{"continuous.consumer.workers", "tools.max_result_bytes", "lease_seconds", "llm.timeout_seconds"} {
		c := configFor(path)
		for _, key := range numericKeys() {
			if key.path == path {
				set(key.field(c), -1)
			}
		}
		p, ok := problemAt(c, path)
		if !ok || !upperBound.MatchString(p.Msg) || !strings.Contains(p.Msg, "from ") {
			t.Errorf("%s: -1 gives %q, want the range", path, fmt.Sprint(p.Msg))
		}
	}
}
