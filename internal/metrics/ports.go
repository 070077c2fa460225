package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/toolhost"
)

// Store returns s with the counters it records also counted here: model
// calls and tokens as the engine records them for each task, so that the
// metrics and `status` agree.
func (m *Metrics) Store(s store.Store) store.Store { return countingStore{Store: s, m: m} }

type countingStore struct {
	store.Store
	m *Metrics
}

func (c countingStore) AddCounters(ctx context.Context, ref task.Ref, d store.Counters) error {
	if err := c.Store.AddCounters(ctx, ref, d); err != nil {
		return err
	}
	c.m.modelCalls.Add(float64(d.LLMCalls))
	c.m.tokensIn.Add(float64(d.TokensIn))
	c.m.tokensOut.Add(float64(d.TokensOut))
	return nil
}

// Caller returns c with its calls and their errors counted: a result the
// tool marked as an error, or a call that could not be made.
func (m *Metrics) Caller(c engine.Caller) engine.Caller { return countingCaller{c: c, m: m} }

type countingCaller struct {
	c engine.Caller
	m *Metrics
}

func (c countingCaller) Call(ctx context.Context, name string, args json.RawMessage) (toolhost.Result, error) {
	res, err := c.c.Call(ctx, name, args)
	c.m.toolCalls.Inc()
	if err != nil || res.IsError {
		c.m.toolErrors.Inc()
	}
	return res, err
}

// Tools returns the MCP host t with its calls counted as Caller counts them.
func (m *Metrics) Tools(t engine.Tools) engine.Tools {
	return countingTools{t: t, c: countingCaller{c: t, m: m}}
}

type countingTools struct {
	t engine.Tools
	c countingCaller
}

func (t countingTools) Tools() []toolhost.Tool           { return t.t.Tools() }
func (t countingTools) Servers() []toolhost.ServerConfig { return t.t.Servers() }

func (t countingTools) Call(ctx context.Context, name string, args json.RawMessage) (toolhost.Result, error) {
	return t.c.Call(ctx, name, args)
}

// Transport returns base with the forge's answers counted: a 304 to a
// conditional request is unbilled (GitHub does not count it against the
// rate limit), every other answer billed; the rate limit's remaining
// requests are read from the answer's headers, and a good answer marks
// the forge reached (ForgeSeen). It goes below the conditional-request
// cache, so that it sees what is sent over the network.
func (m *Metrics) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return countingTransport{base: base, m: m}
}

type countingTransport struct {
	base http.RoundTripper
	m    *Metrics
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	billed := "true"
	if resp.StatusCode == http.StatusNotModified {
		billed = "false"
	}
	t.m.forgeRequests.WithLabelValues(billed).Inc()
	for _, h := range []string{"X-RateLimit-Remaining", "RateLimit-Remaining"} {
		if v := resp.Header.Get(h); v != "" {
			if n, perr := strconv.Atoi(v); perr == nil {
				t.m.rateRemaining.Set(float64(n))
			}
			break
		}
	}
	if resp.StatusCode < 500 && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.m.forgeSeen.Store(t.m.o.Now().UnixNano())
	}
	return resp, nil
}
