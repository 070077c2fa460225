package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// LMStudioContextLength asks an LM Studio server (its native REST API,
// GET /api/v0/models/{model}, beside the OpenAI-compatible /v1) for the
// context the model is loaded with. It is 0 when the server does not say:
// the model is not loaded (LM Studio then loads it with its default), or
// the server is not LM Studio.
func LMStudioContextLength(ctx context.Context, client *http.Client, baseURL, model string) (int, error) {
	base, err := url.Parse(baseURL)
	if err != nil {
		return 0, fmt.Errorf("asking lm studio for the context length: base url %q: %w", baseURL, err)
	}
	base.Path = strings.TrimSuffix(strings.TrimSuffix(base.Path, "/"), "/v1") + "/api/v0/models/" + url.PathEscape(model)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("asking lm studio for the context length: %w", err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("asking lm studio for the context length of %s: %w", model, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("asking lm studio for the context length of %s: http status %d", model, resp.StatusCode)
	}
	var m struct {
		State  string `json:"state"`
		Loaded int    `json:"loaded_context_length"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return 0, fmt.Errorf("reading lm studio's model %s: %w", model, err)
	}
	if m.State != "loaded" {
		return 0, nil
	}
	return m.Loaded, nil
}
