package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	oa "github.com/openai/openai-go/v3"

	"github.com/coding-agent/coding-agent/internal/llm"
)

// maxMessage caps the server's error text kept in a StatusError.
const maxMessage = 500

// StatusError is an HTTP error answer from the API. Callers that may not
// import this package can still read the status with errors.As against an
// interface{ HTTPStatus() int }.
type StatusError struct {
	Code    int
	Message string // the server's error message, API key removed, capped
	Type    string // the API's error code, e.g. context_length_exceeded
	// InBody is set when the server answered 200 with an error in the body
	// (wire.AnswerTransport): Code is then 200.
	InBody bool
}

// Unwrap is llm.ErrContextLength for a request the server refused as
// longer than the context window: OpenAI's code, or the message vLLM and
// other OpenAI-compatible servers send ("maximum context length").
func (e *StatusError) Unwrap() error {
	if (e.Code == http.StatusBadRequest || e.InBody) && (e.Type == "context_length_exceeded" ||
		strings.Contains(strings.ToLower(e.Message), "maximum context length")) {
		return llm.ErrContextLength
	}
	return nil
}

func (e *StatusError) Error() string {
	if e.InBody {
		return fmt.Sprintf("the server answered status %d with an error: %s", e.Code, e.Message)
	}
	if e.Message == "" {
		return fmt.Sprintf("http status %d", e.Code)
	}
	return fmt.Sprintf("http status %d: %s", e.Code, e.Message)
}

// HTTPStatus is the status code the server answered.
func (e *StatusError) HTTPStatus() int { return e.Code }

// apiError turns an error answer into a StatusError. The library's own
// error is not kept: it holds the request, headers and API key included.
// raw is the last HTTP response, when there was one.
func apiError(err error, raw *http.Response, key string) error {
	var se *StatusError
	var ae *oa.Error
	switch {
	case errors.As(err, &ae):
		msg := ae.Message
		if msg == "" {
			msg = errorText(body(ae.Response))
		}
		se = &StatusError{Code: ae.StatusCode, Message: clean(msg, key), Type: ae.Code}
	case raw != nil && raw.StatusCode >= http.StatusBadRequest:
		// An error answer whose error is not the library's object (a
		// string, or vLLM's {"object": "error", "message": ...}) fails in
		// the library's decoding instead.
		se = &StatusError{Code: raw.StatusCode, Message: clean(errorText(body(raw)), key)}
	default:
		return err
	}
	if raw != nil {
		if code, err := strconv.Atoi(raw.Header.Get(llm.ErrorInBody)); err == nil {
			se.Code, se.InBody = code, true
		}
	}
	return se
}

// errorText is the message of an error body: its "error" when that is a
// string, its "message" when that is, else the body itself.
func errorText(b string) string {
	var e struct {
		Error   any `json:"error"`
		Message any `json:"message"`
	}
	if json.Unmarshal([]byte(b), &e) == nil {
		for _, v := range []any{e.Error, e.Message} {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	return b
}

// body reads the start of an error answer's body, which the library leaves
// readable: enough to find the message in it.
func body(resp *http.Response) string {
	if resp == nil || resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return string(b)
}

// clean removes the API key and caps the length of a server message.
func clean(msg, key string) string {
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// redactedError hides the API key in an error's text and keeps the chain
// for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redact(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), key, "[redacted]"), err: err}
}
