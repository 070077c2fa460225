package ollama_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm/ollama"
)

// Ollama's /api/show answers model_info with "<architecture>.context_length"
// (https://docs.ollama.com/api/show); a model that does not say gives 0.
func TestModelContextLength(t *testing.T) {
	for _, tc := range []struct {
		name string
		info map[string]any
		want int
	}{
		{"qwen3", map[string]any{"general.architecture": "qwen3", "qwen3.context_length": 40960, "qwen3.embedding_length": 4096}, 40960},
		{"llama", map[string]any{"general.architecture": "llama", "llama.context_length": 131072}, 131072},
		{"silent", map[string]any{"general.architecture": "x"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req struct{ Model string }
				if r.URL.Path != "/api/show" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != model {
					http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
					return
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"model_info": tc.info})
			}))
			defer srv.Close()
			c, err := ollama.New(ollama.Options{Endpoint: srv.URL, Model: model})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ModelContextLength(t.Context())
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	t.Run("no such model", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		c, _ := ollama.New(ollama.Options{Endpoint: srv.URL, Model: model})
		if _, err := c.ModelContextLength(t.Context()); err == nil {
			t.Error("want an error for a 404")
		}
	})
}
