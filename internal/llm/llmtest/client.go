package llmtest

import (
	"context"
	"net/http"
	"time"

	"github.com/coding-agent/coding-agent/internal/httpx"
	llmwire "github.com/coding-agent/coding-agent/internal/llm/wire"
)

// Retrying is the model HTTP client the daemon builds (the retry layer over
// wire.AnswerTransport, over next: nil is the network), without the waits
// between retries.
func Retrying(next http.RoundTripper) *http.Client {
	return httpx.NewClient(httpx.Options{RetryUnsafe: true, JSON: true, Base: llmwire.AnswerTransport{Next: next},
		Sleep: func(context.Context, time.Duration) error { return nil }})
}
