package llmtest

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/coding-agent/coding-agent/internal/llm/record"
)

// Raw answers with an answer as it was recorded: Status, ContentType and
// Body verbatim (no Content-Type header at all when ContentType is "").
// Status 0 drops the connection unanswered, as an attempt that got no
// answer; Drop sends the status, the headers and Body and then drops the
// connection, as an answer that broke off. Wire, when set, is the wire
// format the request must come in: a recording made on the other one
// fails the test.
type Raw struct {
	Wire        string
	Status      int
	ContentType string
	Body        []byte
	Drop        bool
}

func (Raw) isStep() {}

func (s *Server) raw(w http.ResponseWriter, rec Received, st Raw) {
	if st.Wire != "" && st.Wire != rec.Wire {
		msg := fmt.Sprintf("llmtest: request %d came on the %s wire; the recorded answer is of the %s wire", rec.N, rec.Wire, st.Wire)
		s.t.Errorf("%s", msg)
		writeRaw(w, http.StatusInternalServerError, msg)
		return
	}
	if st.Status == 0 {
		panic(http.ErrAbortHandler)
	}
	if st.ContentType != "" {
		w.Header().Set("Content-Type", st.ContentType)
	} else {
		w.Header()["Content-Type"] = nil // no header, and no sniffing one
	}
	w.WriteHeader(st.Status)
	_, _ = w.Write(st.Body)
	if st.Drop {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
}

// ReadRecording reads the recording (llm.record's file) at path, failing
// the test when it cannot.
func ReadRecording(t testing.TB, path string) []record.Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("llmtest: %v", err)
	}
	defer f.Close()
	entries, err := record.Read(f)
	if err != nil {
		t.Fatalf("llmtest: %s: %v", path, err)
	}
	return entries
}

// RecordedTasks are the tasks of a recording's lines, in the order they
// first appear ("" for lines made outside a task, such as doctor's
// probes).
func RecordedTasks(entries []record.Entry) []string {
	var out []string
	for _, e := range entries {
		if !slices.Contains(out, e.Task) {
			out = append(out, e.Task)
		}
	}
	return out
}

// TaskEntries are the chat lines (OpenAI or Ollama wire) of one task of a
// recording, in order. Task "" means the one task the recording holds, or,
// when it holds none, its lines made outside a task; a recording of
// several tasks fails the test then, naming them.
func TaskEntries(t testing.TB, entries []record.Entry, task string) []record.Entry {
	t.Helper()
	if task == "" {
		tasks := slices.DeleteFunc(RecordedTasks(entries), func(s string) bool { return s == "" })
		switch len(tasks) {
		case 0:
		case 1:
			task = tasks[0]
		default:
			t.Fatalf("llmtest: the recording holds the tasks %s: say which to replay", strings.Join(tasks, ", "))
		}
	}
	var out []record.Entry
	for _, e := range entries {
		if e.Task == task && e.Wire != "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatalf("llmtest: the recording holds no model request of task %q", task)
	}
	return out
}

// Answer is the step that answers as the recorded attempt e was answered.
// An answer cut at recording (larger than the recorder's limit) cannot be
// given byte for byte, and fails the test.
func Answer(t testing.TB, e record.Entry) Step {
	t.Helper()
	if e.ResponseCut {
		t.Fatalf("llmtest: the answer of %s at %s was cut at recording (%d bytes): it cannot be replayed as it was",
			e.Task, e.Time.Format("15:04:05.000"), e.ResponseBytes)
	}
	body, err := e.ResponseBody()
	if err != nil {
		t.Fatalf("llmtest: %v", err)
	}
	// An answer whose body broke off (an error beside a status) or was
	// left unread is sent as far as it was seen, and then dropped.
	drop := e.Status != 0 && (e.Error != "" || e.ResponseUnread)
	return Raw{Wire: e.Wire, Status: e.Status, ContentType: e.ContentType, Body: body, Drop: drop}
}

// ScriptRecording appends to the script the answers the recording at path
// holds for task (see TaskEntries for ""), in order, each as it was sent,
// and returns the lines scripted: a replay's requests can be compared
// with theirs.
func (s *Server) ScriptRecording(path, task string) []record.Entry {
	s.t.Helper()
	entries := TaskEntries(s.t, ReadRecording(s.t, path), task)
	for _, e := range entries {
		s.Script(Answer(s.t, e))
	}
	return entries
}
