// Package openai is the llm provider for OpenAI chat completions and the
// servers that speak the same wire format (LM Studio, vLLM, Ollama's /v1).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// DefaultBaseURL is OpenAI's API root.
const DefaultBaseURL = "https://api.openai.com/v1"

// Options configures a Client. Zero values mean defaults.
type Options struct {
	BaseURL string // default DefaultBaseURL; LM Studio: http://localhost:1234/v1
	APIKey  string // sent as a bearer token when not empty; never logged
	Model   string // required
	// MaxTokens caps each reply when a Request does not; 0 leaves it to the
	// server. It is sent as max_completion_tokens to api.openai.com (newer
	// models reject max_tokens) and as max_tokens elsewhere (what
	// OpenAI-compatible servers understand).
	MaxTokens int
	// HTTPClient carries the requests; nil means a plain http.Client. The
	// library's own retries are off: retrying is this client's job.
	HTTPClient *http.Client
	Logger     *slog.Logger // nil discards
}

// Client is an llm.Client over the chat completions API.
type Client struct {
	svc       oa.ChatCompletionService
	model     string
	maxTokens int
	legacyMax bool // send max_tokens rather than max_completion_tokens
	apiKey    string
	log       *slog.Logger
}

var _ llm.Client = (*Client)(nil)

// New checks the options and builds a client. It reads no environment
// variable: an OPENAI_API_KEY set for something else is never sent here.
func New(opts Options) (*Client, error) {
	if opts.Model == "" {
		return nil, errors.New("creating openai client: model is required")
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("creating openai client: max tokens %d is negative", opts.MaxTokens)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("creating openai client: base url %q is not an http(s) url", opts.BaseURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(opts.BaseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(opts.APIKey))
	}
	return &Client{
		svc:       oa.NewChatCompletionService(reqOpts...),
		model:     opts.Model,
		maxTokens: opts.MaxTokens,
		legacyMax: base.Hostname() != "api.openai.com",
		apiKey:    opts.APIKey,
		log:       log,
	}, nil
}

// Chat sends one chat completion request and maps the first choice back.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return llm.Response{}, c.wrap(err)
	}
	var raw *http.Response
	res, err := c.svc.New(ctx, params, option.WithResponseInto(&raw))
	if err != nil {
		return llm.Response{}, c.wrap(apiError(err, raw, c.apiKey))
	}
	if res == nil || len(res.Choices) == 0 {
		return llm.Response{}, c.wrap(llm.ErrEmptyReply)
	}
	choice := res.Choices[0]
	msg := fromMessage(choice.Message, len(req.Messages), c.log)
	usage := llm.Usage{
		InputTokens:  int(res.Usage.PromptTokens),
		OutputTokens: int(res.Usage.CompletionTokens),
	}
	c.log.DebugContext(ctx, "chat completion",
		"model", c.model, "messages", len(req.Messages), "tools", len(req.Tools),
		"finish_reason", choice.FinishReason, "tool_calls", len(msg.ToolCalls),
		"input_tokens", usage.InputTokens, "output_tokens", usage.OutputTokens)
	return llm.Response{Message: msg, Usage: usage, FinishReason: choice.FinishReason}, nil
}

func (c *Client) params(req llm.Request) (oa.ChatCompletionNewParams, error) {
	msgs, err := toMessages(req.Messages)
	if err != nil {
		return oa.ChatCompletionNewParams{}, err
	}
	tools, err := toTools(req.Tools)
	if err != nil {
		return oa.ChatCompletionNewParams{}, err
	}
	p := oa.ChatCompletionNewParams{Model: c.model, Messages: msgs, Tools: tools}
	if len(req.Format) > 0 {
		p.ResponseFormat = responseFormat(req.Format)
	}
	if req.ToolChoice != "" && len(tools) > 0 {
		p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oa.String(req.ToolChoice)}
	}
	limit := req.MaxTokens
	if limit <= 0 {
		limit = c.maxTokens
	}
	switch {
	case limit <= 0:
	case c.legacyMax:
		p.MaxTokens = oa.Int(int64(limit))
	default:
		p.MaxCompletionTokens = oa.Int(int64(limit))
	}
	return p, nil
}

// responseFormat asks for a reply matching schema: response_format
// {"type": "json_schema", "json_schema": {"name", "schema"}}, the form
// OpenAI defined and LM Studio, llama.cpp's server, vLLM and SGLang read.
// "strict" is left out: strict true makes api.openai.com refuse a schema
// with an open object (a tool's "args") or anyOf at its root, and strict
// false means "guidance only" in OpenAI's terms, which vLLM is adopting
// (vllm-project/vllm#50544: no grammar then); left out, the local servers
// enforce the schema and api.openai.com takes it as guidance.
func responseFormat(schema json.RawMessage) oa.ChatCompletionNewParamsResponseFormatUnion {
	return oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "reply", Schema: schema},
	}}
}

// wrap names the action and keeps the API key out of the text.
func (c *Client) wrap(err error) error {
	return redact(fmt.Errorf("openai chat completion (model %s): %w", c.model, err), c.apiKey)
}
