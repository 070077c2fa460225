package httpx

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ErrBadBody is returned (wrapped) when a successful answer that should be
// JSON is not: cut short, or a page of HTML from a proxy or a login wall.
// The retry layer treats it as transient, like a 5xx.
var ErrBadBody = errors.New("the answer is not the JSON it should be")

// errReadBody wraps a failure to read an answer's body (a connection cut or
// stalled mid-body): transient too.
var errReadBody = errors.New("reading the answer")

// ReadFailed marks err as a failure to read an answer's body (a
// connection cut or stalled mid-body) for a transport below the retry layer
// that reads answers itself (wire.AnswerTransport): it is retried, and said,
// as the retry layer's own read failures are.
func ReadFailed(err error) error { return fmt.Errorf("%w: %w", errReadBody, err) }

// maxCheckedBody is the largest answer read whole to be checked; the rest
// of a larger one is passed on unchecked.
const maxCheckedBody = 32 << 20

// shouldBeJSON reports whether resp's body must be JSON, and whether as one
// document per line (NDJSON): a success with a body whose Content-Type says
// JSON, or whose request asked for JSON alone (Accept), or any success when
// always is set (Options.JSON), whatever the answer says it is, so that an
// HTML page answered with 200 is caught.
func shouldBeJSON(req *http.Request, resp *http.Response, always bool) (want, lines bool) {
	if req.Method == http.MethodHead || resp.StatusCode < 200 || resp.StatusCode > 299 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusResetContent {
		return false, false
	}
	if kind := jsonKind(resp.Header.Get("Content-Type")); kind != notJSON {
		return true, kind == jsonLines
	}
	accepts := strings.Split(req.Header.Get("Accept"), ",")
	lines = len(accepts) == 1 && jsonKind(accepts[0]) == jsonLines
	for _, a := range accepts {
		if jsonKind(a) == notJSON {
			return always, lines
		}
	}
	return true, lines
}

type mediaKind int

const (
	notJSON mediaKind = iota
	jsonDoc
	jsonLines
)

// jsonKind says whether a media type (with parameters) is JSON: application/json,
// a +json type (application/vnd.github.v3+json), or NDJSON.
func jsonKind(mediaType string) mediaKind {
	mt, _, err := mime.ParseMediaType(strings.TrimSpace(mediaType))
	switch {
	case err != nil:
		return notJSON
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return jsonDoc
	case mt == "application/x-ndjson" || mt == "application/jsonl":
		return jsonLines
	}
	return notJSON
}

// checkJSON says what is wrong with body as the answer's JSON, or nil. An
// empty body passes: whether an answer may be empty is the caller's to say
// (a model's empty answer is an unusable reply, not an outage).
func checkJSON(resp *http.Response, body []byte, lines bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	docs := [][]byte{body}
	if lines {
		docs = bytes.Split(body, []byte("\n"))
	}
	for _, doc := range docs {
		if len(bytes.TrimSpace(doc)) == 0 || json.Valid(doc) {
			continue
		}
		what := fmt.Sprintf("%d bytes of %s", len(body), cmp.Or(resp.Header.Get("Content-Type"), "no stated type"))
		var se *json.SyntaxError
		if err := json.Unmarshal(doc, new(json.RawMessage)); errors.As(err, &se) && se.Offset >= int64(len(doc)) {
			return fmt.Errorf("%w: %s with %s, cut short in the middle of its JSON", ErrBadBody, resp.Status, what)
		} else if err != nil {
			return fmt.Errorf("%w: %s with %s beginning %q: %v", ErrBadBody, resp.Status, what, head(doc, 40), err)
		}
	}
	return nil
}

// readChecked reads a body that should be JSON and checks it. The answer
// it returns carries the body read; a body larger than maxCheckedBody is
// passed on with its rest unread and unchecked. release is called once the
// body is read whole or, for a larger one, when it is closed.
func readChecked(resp *http.Response, lines bool, release func()) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCheckedBody+1))
	if err != nil {
		resp.Body.Close()
		release()
		return fmt.Errorf("%w: %w", errReadBody, err)
	}
	if len(body) > maxCheckedBody {
		rest := resp.Body
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), rest),
			Closer: &cancelBody{ReadCloser: rest, cancel: release}}
		return nil
	}
	resp.Body.Close()
	release()
	if err := checkJSON(resp, body, lines); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return nil
}

// head is the first n bytes of b as valid text, for an error message.
func head(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b)
}
