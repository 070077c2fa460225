package gitlab

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// apiError is an error answer of GitLab's API as a message reads it: the
// request, the status and what GitLab said ("PUT …/notes/3: 403
// Forbidden", "POST …/merge_requests: 400 source_branch is missing",
// "400 title: is too long"). The client library renders GitLab's JSON as
// "{message: 403 Forbidden}" after a status GitLab's message repeats. It
// unwraps to the *gl.ErrorResponse, which the status checks read.
type apiError struct{ r *gl.ErrorResponse }

// apiErr is err with a *gl.ErrorResponse of the library's (as its calls
// return it) made an apiError; any other err (gl.ErrNotFound, whose text
// says no more than its status, included) as it is.
func apiErr(err error) error {
	if r, ok := err.(*gl.ErrorResponse); ok && r != nil && r.Response != nil {
		return apiError{r}
	}
	return err
}

func (e apiError) Unwrap() error { return e.r }

func (e apiError) Error() string {
	var b strings.Builder
	if req := e.r.Response.Request; req != nil && req.URL != nil {
		u := *req.URL
		u.User, u.RawQuery = nil, "" // as the library writes it
		fmt.Fprintf(&b, "%s %s: ", req.Method, u.String())
	}
	code := strconv.Itoa(e.r.StatusCode)
	said := said(e.r.Body)
	if said == "" {
		said = http.StatusText(e.r.StatusCode)
	}
	// GitLab's messages often begin with the status ("403 Forbidden").
	said = strings.TrimSpace(strings.TrimPrefix(said, code))
	b.WriteString(strings.TrimSpace(code + " " + said))
	return b.String()
}

// said is what GitLab's error body says: its message (a sentence, or each
// field's complaints), its error and error_description; "" when the body
// is not GitLab's JSON.
func said(body []byte) string {
	var v struct {
		Message     any    `json:"message"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var parts []string
	if m := flatten(v.Message); m != "" {
		parts = append(parts, m)
	}
	for _, s := range []string{v.Error, v.Description} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// flatten renders a message of GitLab's: a string as it is, a list joined
// with commas, an object as "field: complaints" joined with semicolons (in
// the order of the fields' names).
func flatten(m any) string {
	switch m := m.(type) {
	case string:
		return strings.TrimSpace(m)
	case []any:
		var s []string
		for _, x := range m {
			if f := flatten(x); f != "" {
				s = append(s, f)
			}
		}
		return strings.Join(s, ", ")
	case map[string]any:
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var s []string
		for _, k := range keys {
			if f := flatten(m[k]); f != "" {
				s = append(s, k+": "+f)
			}
		}
		return strings.Join(s, "; ")
	case nil:
		return ""
	}
	return fmt.Sprint(m)
}
