package ollama

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/ollama/ollama/api"
)

// maxMessage caps the server text kept in an error.
const maxMessage = 500

// StatusError is an HTTP error answer from the server. Callers that may not
// import this package can still read the status with errors.As against an
// interface{ HTTPStatus() int }.
type StatusError struct {
	Code    int
	Message string // the server's error message, capped
	// InBody is set when the server answered 200 with an error in the body
	// (wire.AnswerTransport): Code is then 200.
	InBody bool
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

// chatError translates the api client's errors. The client reports a line
// it cannot decode with that line as the error text: it is capped here.
func chatError(err error) error {
	var se api.StatusError
	if errors.As(err, &se) {
		return &StatusError{Code: se.StatusCode, Message: capped(se.ErrorMessage)}
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		code := ae.StatusCode
		if code == 0 {
			code = http.StatusUnauthorized
		}
		return &StatusError{Code: code, Message: "unauthorized"}
	}
	var ue *url.Error
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ue) {
		return err
	}
	// What is left is the body of a 200 answer: an error line or a line
	// that is not JSON.
	return &cappedError{msg: "bad reply: " + capped(err.Error()), err: err}
}

func capped(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// cappedError shortens an error's text and keeps the chain.
type cappedError struct {
	msg string
	err error
}

func (e *cappedError) Error() string { return e.msg }
func (e *cappedError) Unwrap() error { return e.err }
