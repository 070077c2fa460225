// Package ollama is the llm provider for Ollama's native chat API
// (POST /api/chat), with native tools.
package ollama

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// DefaultEndpoint is where a local Ollama listens.
const DefaultEndpoint = "http://localhost:11434"

// Options configures a Client. Zero values mean defaults.
type Options struct {
	Endpoint      string // default DefaultEndpoint
	Model         string // required, e.g. "qwen3:8b"
	MaxTokens     int    // options.num_predict when a Request sets none; 0: the model's default
	ContextLength int    // options.num_ctx; 0: the server's default
	// HTTPClient carries the requests; nil means a plain http.Client.
	HTTPClient *http.Client
	Logger     *slog.Logger // nil discards
}

// Client is an llm.Client over Ollama's native chat.
type Client struct {
	api       *api.Client
	model     string
	maxTokens int
	numCtx    int
	log       *slog.Logger
}

var _ llm.Client = (*Client)(nil)

// New checks the options and builds a client.
func New(opts Options) (*Client, error) {
	if opts.Model == "" {
		return nil, errors.New("creating ollama client: model is required")
	}
	if opts.MaxTokens < 0 || opts.ContextLength < 0 {
		return nil, fmt.Errorf("creating ollama client: max tokens %d and context length %d must not be negative",
			opts.MaxTokens, opts.ContextLength)
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	base, err := url.Parse(opts.Endpoint)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("creating ollama client: endpoint %q is not an http(s) url", opts.Endpoint)
	}
	hc := http.Client{}
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = statusTransport{next: next}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		api:       api.NewClient(base, &hc),
		model:     opts.Model,
		maxTokens: opts.MaxTokens,
		numCtx:    opts.ContextLength,
		log:       log,
	}, nil
}

// Chat sends one non-streaming chat request. Streamed answers are put
// together too, should a server stream anyway.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	creq, err := c.request(req)
	if err != nil {
		return llm.Response{}, c.wrap(err)
	}
	var status answered
	var acc reply
	err = c.api.Chat(context.WithValue(ctx, statusKey{}, &status), creq, acc.add)
	switch {
	case err != nil:
		return llm.Response{}, c.wrap(status.said(chatError(err)))
	case acc.chunks == 0 && status.code >= http.StatusBadRequest:
		return llm.Response{}, c.wrap(status.said(&StatusError{Code: status.code}))
	case acc.chunks == 0:
		return llm.Response{}, c.wrap(llm.ErrEmptyReply)
	case !acc.done:
		return llm.Response{}, c.wrap(errors.New("reply ended before done"))
	}
	msg, nameless := acc.message(len(req.Messages))
	if nameless > 0 {
		c.log.WarnContext(ctx, "ignoring tool calls without a function name", "calls", nameless)
	}
	usage := llm.Usage{InputTokens: acc.in, OutputTokens: acc.out}
	c.log.DebugContext(ctx, "ollama chat",
		"model", c.model, "messages", len(req.Messages), "tools", len(req.Tools),
		"done_reason", acc.reason, "tool_calls", len(msg.ToolCalls),
		"input_tokens", usage.InputTokens, "output_tokens", usage.OutputTokens)
	return llm.Response{Message: msg, Usage: usage, FinishReason: acc.reason}, nil
}

func (c *Client) request(req llm.Request) (*api.ChatRequest, error) {
	msgs, err := toMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	tools, err := toTools(req.Tools)
	if err != nil {
		return nil, err
	}
	stream := false
	// Format is the schema the reply must match: Ollama turns it into a
	// grammar. Ollama's API has no tool_choice: a request's ToolChoice is
	// not sent.
	creq := &api.ChatRequest{Model: c.model, Messages: msgs, Stream: &stream, Tools: tools, Format: req.Format}
	limit := req.MaxTokens
	if limit <= 0 {
		limit = c.maxTokens
	}
	if limit > 0 || c.numCtx > 0 {
		creq.Options = map[string]any{}
	}
	if limit > 0 {
		creq.Options["num_predict"] = limit
	}
	if c.numCtx > 0 {
		creq.Options["num_ctx"] = c.numCtx
	}
	return creq, nil
}

func (c *Client) wrap(err error) error {
	return fmt.Errorf("ollama chat (model %s): %w", c.model, err)
}

// statusKey carries, in a request's context, where statusTransport writes
// the status answered: the api client drops the status of an error answer
// with an empty body, and the header saying the server answered 200 with
// an error (wire.AnswerTransport).
type statusKey struct{}

// answered is what statusTransport saw of the answer.
type answered struct {
	code   int
	inBody int // the status the server sent an error in the body with; 0: none
}

// said marks an error answer that came with a success status as such.
func (a answered) said(err error) error {
	if se, ok := errors.AsType[*StatusError](err); ok && a.inBody != 0 {
		se.Code, se.InBody = a.inBody, true
	}
	return err
}

type statusTransport struct{ next http.RoundTripper }

func (t statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if p, ok := r.Context().Value(statusKey{}).(*answered); ok && resp != nil {
		p.code = resp.StatusCode
		p.inBody, _ = strconv.Atoi(resp.Header.Get(llm.ErrorInBody))
	}
	return resp, err
}

// ModelContextLength asks the server for the model's context window: the
// "<architecture>.context_length" of /api/show's model_info. It is 0 when
// the server does not say.
func (c *Client) ModelContextLength(ctx context.Context) (int, error) {
	show, err := c.api.Show(ctx, &api.ShowRequest{Model: c.model})
	if err != nil {
		return 0, fmt.Errorf("asking ollama for the context length of %s: %w", c.model, err)
	}
	for k, v := range show.ModelInfo {
		if n, ok := v.(float64); ok && strings.HasSuffix(k, ".context_length") && n > 0 {
			return int(n), nil
		}
	}
	return 0, nil
}

// Models lists the models the server has pulled (GET /api/tags).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	list, err := c.api.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing ollama's models: %w", err)
	}
	out := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		out = append(out, m.Name)
	}
	return out, nil
}
