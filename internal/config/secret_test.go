package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

// secretName is a field name that says it holds a secret: a token, a key,
// a password, a webhook secret (not a file holding one, not a count).
var secretName = regexp.MustCompile(`(?i)(token|secret|key|password|passwd)$`)

// Every string field of the configuration whose name says it holds a
// secret is a config.Secret, which Secrets finds wherever it is: a new
// token field declared as a plain string fails here, rather than being
// left out of the redaction.
func TestEverySecretIsASecret(t *testing.T) {
	var walk func(path string, ty reflect.Type, seen map[reflect.Type]bool)
	walk = func(path string, ty reflect.Type, seen map[reflect.Type]bool) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for f := range ty.Fields() {
			if !f.IsExported() {
				continue
			}
			p := path + "." + f.Name
			if f.Type.Kind() == reflect.String && secretName.MatchString(f.Name) && f.Type != reflect.TypeFor[config.Secret]() {
				t.Errorf("%s is a %s: a secret must be a config.Secret", p, f.Type)
			}
			walk(p, f.Type, seen)
		}
	}
	walk("Config", reflect.TypeFor[config.Config](), map[reflect.Type]bool{})
}

// Each Secret field's value is among Secrets, found by its type: set one
// by one to a value of its own, through reflection, each comes back. A
// Secret prints as [secret] with fmt and slog; Reveal is its value.
func TestSecretsFindsEverySecretField(t *testing.T) {
	c, _ := mustParse(t, minimalGitHub, nil)
	c.GitHub.App = &config.GitHubApp{}
	n := 0
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		switch {
		case v.Kind() == reflect.Pointer && !v.IsNil():
			set(v.Elem())
		case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
			for i := range v.Len() {
				set(v.Index(i))
			}
		case v.Kind() == reflect.Map:
			for _, k := range v.MapKeys() { // a map's values are not addressable: set a copy, put it back
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				set(e)
				v.SetMapIndex(k, e)
			}
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					set(v.Field(i))
				}
			}
		case v.Type() == reflect.TypeFor[config.Secret]():
			n++
			v.SetString(fmt.Sprintf("secret-value-%d", n))
		}
	}
	set(reflect.ValueOf(c).Elem())
	if n < 6 {
		t.Fatalf("%d Secret fields set, want the 6 known at least (two tokens, the app key, the API key, two webhook secrets)", n)
	}
	got := c.Secrets()
	for i := 1; i <= n; i++ {
		if want := fmt.Sprintf("secret-value-%d", i); !slices.Contains(got, want) {
			t.Errorf("Secrets %q lacks %s", got, want)
		}
	}
	s := config.Secret("ghp_example")
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("x", "token", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%s %v %+v", s, s, struct{ T config.Secret }{s}), log.String()} {
		if strings.Contains(out, "ghp_example") || !strings.Contains(out, "[secret]") {
			t.Errorf("a Secret printed as %q", out)
		}
	}
	if s.Reveal() != "ghp_example" {
		t.Errorf("Reveal = %q", s.Reveal())
	}
}
