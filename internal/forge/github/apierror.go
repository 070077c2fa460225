package github

import (
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v92/github"
)

// apiError is an error answer of GitHub's API as a message reads it: the
// request, the status and GitHub's message, then the details GitHub gave,
// one each ("POST …/pulls: 422 Validation Failed: PullRequest.head
// invalid"). go-github's own text ends with its list of details as Go prints
// it: "[]" when there is none, "[{Resource:PullRequest …}]" when there are.
// It unwraps to the *gh.ErrorResponse, which the status checks read.
type apiError struct{ r *gh.ErrorResponse }

// apiErr is err with a *gh.ErrorResponse of go-github's (as its calls
// return it) made an apiError; any other err as it is.
func apiErr(err error) error {
	if r, ok := err.(*gh.ErrorResponse); ok && r != nil {
		return apiError{r}
	}
	return err
}

func (e apiError) Unwrap() error { return e.r }

func (e apiError) Error() string {
	var b strings.Builder
	msg := strings.TrimSpace(e.r.Message)
	if resp := e.r.Response; resp != nil {
		if req := resp.Request; req != nil && req.URL != nil {
			u := *req.URL
			u.User = nil
			fmt.Fprintf(&b, "%s %s: ", req.Method, u.String())
		}
		fmt.Fprintf(&b, "%d", resp.StatusCode)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
	}
	if msg != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(msg)
	}
	for i, d := range e.r.Errors {
		b.WriteString(map[bool]string{true: ": ", false: "; "}[i == 0])
		b.WriteString(detail(d))
	}
	return b.String()
}

// detail is one of an answer's details: "PullRequest.head invalid", with
// GitHub's message when it gave one.
func detail(d gh.Error) string {
	where := d.Resource
	if d.Field != "" {
		where = strings.TrimPrefix(where+"."+d.Field, ".")
	}
	s := strings.TrimSpace(where + " " + d.Code)
	if m := strings.TrimSpace(d.Message); m != "" {
		if s == "" || s == "custom" {
			return m
		}
		return s + " (" + m + ")"
	}
	return s
}
