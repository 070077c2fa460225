package openai_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm/openai"
)

// LM Studio's native model endpoint, as documented at
// https://lmstudio.ai/docs/api/rest-api (GET /api/v0/models/{model}).
func TestLMStudioContextLength(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       int
		err        bool
	}{
		{"loaded", `{"id":"qwen3-8b","object":"model","type":"llm","state":"loaded","max_context_length":40960,"loaded_context_length":16384}`, 200, 16384, false},
		{"not loaded", `{"id":"qwen3-8b","object":"model","type":"llm","state":"not-loaded","max_context_length":40960}`, 200, 0, false},
		{"not lm studio", `{"error":"not found"}`, 404, 0, true},
		{"garbage", `<html>`, 200, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v0/models/qwen3-8b" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := openai.LMStudioContextLength(t.Context(), srv.Client(), srv.URL+"/v1", "qwen3-8b")
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("got %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
