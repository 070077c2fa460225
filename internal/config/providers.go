package config

import (
	"reflect"
	"strings"
)

// providerSection is a model provider's section of llm, and what the
// configuration does differently for that provider: its checks, its
// secret that may come from a file, its words in the starter. The
// sections are the one registry of providers here (providerSections);
// nothing else in the package asks which provider is configured.
type providerSection interface {
	// validate checks the section at path (llm.openai); when says when
	// its required keys are.
	validate(k *checker, path, when string)
	// keyFile is its secret that may come from a file; ok false when it
	// has none.
	keyFile(path string) (f secretFile, ok bool)
	// title is the provider in the starter's words; keyVar the
	// environment variable the starter reads its secret from ("": none).
	title() string
	keyVar() string
}

// providerSections are the provider sections of llm, by llm.provider: the
// fields of LLM that are a providerSection, by their key; Providers are
// their keys in LLM's order.
var providerSections, Providers = func() (map[string]func(l *LLM) providerSection, []string) {
	m := map[string]func(*LLM) providerSection{}
	var keys []string
	t := reflect.TypeFor[LLM]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !reflect.PointerTo(f.Type).Implements(reflect.TypeFor[providerSection]()) {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		m[key] = func(l *LLM) providerSection {
			return reflect.ValueOf(l).Elem().Field(i).Addr().Interface().(providerSection)
		}
		keys = append(keys, key)
	}
	return m, keys
}()

// ProviderChoice is the values of llm.provider in prose: "openai,
// lmstudio or ollama".
func ProviderChoice() string { return either(Providers) }

// provider is the configured provider's section; nil for a value
// Validate refuses.
func (l *LLM) provider() providerSection {
	if s, ok := providerSections[l.Provider]; ok {
		return s(l)
	}
	return nil
}

func (o *OpenAI) validate(k *checker, path, when string) {
	k.url(path+".base_url", o.BaseURL)
	k.required(path+".api_key", o.APIKey.Reveal(), when+" (or "+path+".api_key_file)")
	k.required(path+".model", o.Model, when)
	modelLimits(k, path, o.MaxToken, o.ContextLength)
}

func (s *LMStudio) validate(k *checker, path, when string) {
	k.url(path+".base_url", s.BaseURL)
	k.required(path+".model", s.Model, when)
	modelLimits(k, path, s.MaxToken, s.ContextLength)
}

func (o *Ollama) validate(k *checker, path, when string) {
	k.url(path+".endpoint", o.Endpoint)
	k.required(path+".model", o.Model, when)
	modelLimits(k, path, o.MaxToken, o.ContextLength)
}

func (o *OpenAI) keyFile(path string) (secretFile, bool) {
	return secretFile{path + ".api_key", &o.APIKey, o.APIKeyFile}, true
}
func (s *LMStudio) keyFile(string) (secretFile, bool) { return secretFile{}, false }
func (o *Ollama) keyFile(string) (secretFile, bool)   { return secretFile{}, false }

func (o *OpenAI) title() string   { return "an OpenAI model" }
func (s *LMStudio) title() string { return "a model served by LM Studio" }
func (o *Ollama) title() string   { return "a model served by Ollama" }

func (o *OpenAI) keyVar() string   { return "OPENAI_API_KEY" }
func (s *LMStudio) keyVar() string { return "" }
func (o *Ollama) keyVar() string   { return "" }
