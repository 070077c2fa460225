package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/llm"
	"github.com/coding-agent/coding-agent/internal/llm/ollama"
	"github.com/coding-agent/coding-agent/internal/llm/openai"
	"github.com/coding-agent/coding-agent/internal/llm/tokens"
)

// A provider is one kind of model server: everything the daemon does
// differently for it, in one entry of the one registry (providers). No
// other code asks which provider is configured: an entry that lacks a
// fact does not compile, where a switch that lacked a case ran the
// provider without a context budget.
type provider struct {
	// settings are its section of llm: the model, the window and the
	// reply reserve as configured (0: not set), and where the server is.
	settings func(c config.LLM) (model string, window, reserve int, where string)
	// window is the context window when context_length is not set: what
	// the server says, else the provider's default (logged).
	window func(ctx context.Context, a *App, model string) int
	// client is the model client, for the window and the reply reserve,
	// sending through hc.
	client func(c config.LLM, window, reserve int, hc *http.Client, log *slog.Logger) (llm.Client, error)
	// served lists the models the server serves, through hc.
	served func(ctx context.Context, c config.LLM, hc *http.Client, log *slog.Logger) ([]string, error)
	// maxTools is the most tools one request may offer; 0: no limit.
	maxTools int
	// pull is how the operator gets a model the server does not serve: a
	// command, %s the model ("" when there is none).
	pull string
	// toolChoice: the server takes tool_choice; formatField names the
	// request field that holds a reply to a schema.
	toolChoice  bool
	formatField string
}

// Context windows used when context_length is not set and the server does
// not say: OpenAI's current families have theirs (tokens.Window); LM Studio
// loads a model with 4096 unless told otherwise (its REST API says what a
// loaded model has); for Ollama, num_ctx is sent, the model's own window
// capped at 8192 (a larger window costs memory the operator should choose
// to spend).
const (
	openAIMaxTools  = 128 // OpenAI refuses a longer tools array
	unknownContext  = 8192
	lmStudioContext = 4096
	ollamaMaxAuto   = 8192
)

// providers are the model servers, by llm.provider.
var providers = map[string]provider{
	config.ProviderOpenAI: {
		settings: func(c config.LLM) (string, int, int, string) {
			return c.OpenAI.Model, c.OpenAI.ContextLength, c.OpenAI.MaxToken, c.OpenAI.BaseURL
		},
		window: func(_ context.Context, _ *App, model string) int {
			if n := tokens.Window(model); n > 0 {
				return n
			}
			return unknownContext
		},
		client: func(c config.LLM, _, reserve int, hc *http.Client, log *slog.Logger) (llm.Client, error) {
			return openai.New(openai.Options{BaseURL: c.OpenAI.BaseURL, APIKey: c.OpenAI.APIKey.Reveal(), Model: c.OpenAI.Model,
				MaxTokens: reserve, HTTPClient: hc, Logger: log})
		},
		served: func(ctx context.Context, c config.LLM, hc *http.Client, _ *slog.Logger) ([]string, error) {
			return openai.ListModels(ctx, hc, c.OpenAI.BaseURL, c.OpenAI.APIKey.Reveal())
		},
		maxTools:    openAIMaxTools,
		toolChoice:  true,
		formatField: "response_format",
	},
	config.ProviderLMStudio: {
		settings: func(c config.LLM) (string, int, int, string) {
			return c.LMStudio.Model, c.LMStudio.ContextLength, c.LMStudio.MaxToken, c.LMStudio.BaseURL
		},
		window: func(ctx context.Context, a *App, model string) int {
			n, err := openai.LMStudioContextLength(ctx, a.httpClient(30*time.Second, false), a.cfg.LLM.LMStudio.BaseURL, model)
			if err == nil && n > 0 {
				return n
			}
			a.Log.Warn("the context the model is loaded with is not known; set llm.lmstudio.context_length", "assumed", lmStudioContext, "error", err)
			return lmStudioContext
		},
		client: func(c config.LLM, _, reserve int, hc *http.Client, log *slog.Logger) (llm.Client, error) {
			return openai.New(openai.Options{BaseURL: c.LMStudio.BaseURL, APIKey: "lm-studio", Model: c.LMStudio.Model,
				MaxTokens: reserve, HTTPClient: hc, Logger: log})
		},
		served: func(ctx context.Context, c config.LLM, hc *http.Client, _ *slog.Logger) ([]string, error) {
			return openai.ListModels(ctx, hc, c.LMStudio.BaseURL, "lm-studio")
		},
		toolChoice:  true,
		formatField: "response_format",
	},
	config.ProviderOllama: {
		settings: func(c config.LLM) (string, int, int, string) {
			return c.Ollama.Model, c.Ollama.ContextLength, c.Ollama.MaxToken, c.Ollama.Endpoint
		},
		window: func(ctx context.Context, a *App, model string) int {
			c := a.cfg.LLM.Ollama
			probe, err := ollama.New(ollama.Options{Endpoint: c.Endpoint, Model: model, HTTPClient: a.httpClient(30*time.Second, false), Logger: a.Log})
			if err == nil {
				var n int
				if n, err = probe.ModelContextLength(ctx); err == nil && n > 0 {
					return min(n, ollamaMaxAuto)
				}
			}
			a.Log.Warn("the context length of the model is not known; set llm.ollama.context_length", "assumed", ollamaMaxAuto, "error", err)
			return ollamaMaxAuto
		},
		client: func(c config.LLM, window, reserve int, hc *http.Client, log *slog.Logger) (llm.Client, error) {
			return ollama.New(ollama.Options{Endpoint: c.Ollama.Endpoint, Model: c.Ollama.Model, MaxTokens: reserve,
				ContextLength: window, HTTPClient: hc, Logger: log})
		},
		served: func(ctx context.Context, c config.LLM, hc *http.Client, log *slog.Logger) ([]string, error) {
			m, err := ollama.New(ollama.Options{Endpoint: c.Ollama.Endpoint, Model: c.Ollama.Model, HTTPClient: hc, Logger: log})
			if err != nil {
				return nil, err
			}
			return m.Models(ctx)
		},
		pull:        "`ollama pull %s`",
		formatField: "format",
	},
}

// provider is the configured model server's entry; the configuration's
// check lets no other provider through.
func (a *App) provider() (provider, error) {
	p, ok := providers[a.cfg.LLM.Provider]
	if !ok {
		return provider{}, fmt.Errorf("llm.provider %q is not openai, lmstudio or ollama", a.cfg.LLM.Provider)
	}
	return p, nil
}
