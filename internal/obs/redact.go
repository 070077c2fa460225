package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/coding-agent/coding-agent/internal/sanitize"
)

// RedactHandler is a slog.Handler that removes secrets from a record's message
// and from every attribute (group names and keys, string values, values in
// nested groups, LogValuers, and errors and other values whose text holds a
// secret) before passing it on.
type RedactHandler struct {
	inner  slog.Handler
	redact func(string) string
}

var _ slog.Handler = (*RedactHandler)(nil)

// NewRedactHandler wraps inner so that secrets (in every form
// sanitize.NewRedactor finds) and credentials of known shapes never reach it.
func NewRedactHandler(inner slog.Handler, secrets []string) *RedactHandler {
	return &RedactHandler{inner: inner, redact: sanitize.NewRedactor(secrets).Redact}
}

// Enabled defers to the wrapped handler.
func (h *RedactHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle passes on a redacted copy of r.
func (h *RedactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

// WithAttrs redacts attrs before the wrapped handler keeps them.
func (h *RedactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &RedactHandler{inner: h.inner.WithAttrs(red), redact: h.redact}
}

// WithGroup opens a group on the wrapped handler.
func (h *RedactHandler) WithGroup(name string) slog.Handler {
	return &RedactHandler{inner: h.inner.WithGroup(h.redact(name)), redact: h.redact}
}

func (h *RedactHandler) attr(a slog.Attr) slog.Attr {
	return slog.Attr{Key: h.redact(a.Key), Value: h.value(a.Value)}
}

func (h *RedactHandler) value(v slog.Value) slog.Value {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.StringValue(h.redact(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		red := make([]slog.Attr, len(attrs))
		for i, a := range attrs {
			red[i] = h.attr(a)
		}
		return slog.GroupValue(red...)
	case slog.KindAny:
		return h.anyValue(v)
	default: // numbers, bools, times, durations hold no secret
		return v
	}
}

// anyValue keeps v unless its text (as fmt or JSON would render it) holds a
// secret, in which case it becomes that text, redacted.
func (h *RedactHandler) anyValue(v slog.Value) slog.Value {
	var text string
	switch x := v.Any().(type) {
	case error:
		text = x.Error()
	case []byte:
		text = string(x)
	case fmt.Stringer:
		text = x.String()
	default:
		text = fmt.Sprintf("%+v", x)
		if red := h.redact(text); red != text {
			return slog.StringValue(red)
		}
		b, err := json.Marshal(x)
		if err != nil {
			return v
		}
		text = string(b)
	}
	if red := h.redact(text); red != text {
		return slog.StringValue(red)
	}
	return v
}
