package watch_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/coding-agent/coding-agent/internal/forgetest"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// ids are the comments' ids, in order.
func ids(cs []task.Comment) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// Who is heard: the author and listed users always; people with write
// access only with Writers, asked once each; the bot, system notes and blank
// comments never, though they move the mark.
func TestAudienceSortsComments(t *testing.T) {
	for _, writers := range []bool{false, true} {
		name := map[bool]string{false: "without writers", true: "with writers"}[writers]
		t.Run(name, func(t *testing.T) {
			eachForge(t, setup{}, func(t *testing.T, e *env) {
				e.grantWrite("carol")
				old := e.addComment("alice", "already judged")
				alice := e.addComment("alice", "please go on")
				carol := e.addComment("carol", "from a writer")
				bob := e.addComment("bob", "from an outsider")
				dave := e.addComment("dave", "from a listed user")
				e.addComment(e.bot, "the bot's own")
				e.addComment("alice", " \n")
				carol2 := e.addComment("carol", "again from the writer")
				newest := carol2
				if e.addSystem != nil {
					newest = e.addSystem("changed the title")
				}
				created := e.clk.Now()
				comments, err := e.f.Comments(t.Context(), e.ref)
				if err != nil {
					t.Fatal(err)
				}
				e.reset()
				a := watch.Audience{Forge: e.f, Task: e.task(t), Bot: e.bot, Allowed: []string{"Dave"}, Writers: writers}
				s, err := a.Sort(t.Context(), comments, old)
				if err != nil {
					t.Fatal(err)
				}
				heard, ignored := []int64{alice, dave}, []int64{carol, bob, carol2}
				if writers {
					heard, ignored = []int64{alice, carol, dave, carol2}, []int64{bob}
				}
				if got := ids(s.Heard); !cmp.Equal(got, heard) {
					t.Errorf("heard %v, want %v", got, heard)
				}
				if got := ids(s.Ignored); !cmp.Equal(got, ignored) {
					t.Errorf("ignored %v, want %v", got, ignored)
				}
				if s.Mark != newest || !s.Latest.Equal(created) {
					t.Errorf("mark %d, latest %v; want %d and %v", s.Mark, s.Latest, newest, created)
				}
				wantAsked := map[bool]int{false: 0, true: 1}[writers]
				if got := e.permissionChecks("carol"); got != wantAsked {
					t.Errorf("%d permission requests about carol, want %d", got, wantAsked)
				}
				for _, user := range []string{"alice", "dave", e.bot} {
					if got := e.permissionChecks(user); got != 0 {
						t.Errorf("%d permission requests about %s, want none", got, user)
					}
				}

				// Up to the mark nothing is sorted.
				s, err = a.Sort(t.Context(), comments, newest)
				if err != nil || s.Heard != nil || s.Ignored != nil || s.Mark != newest || !s.Latest.IsZero() {
					t.Errorf("sorting up to the mark: %+v, %v; want nothing", s, err)
				}
			})
		})
	}
}

// A permission question that fails fails the sort: nothing is heard and
// the mark stays, so the caller loses no comment.
func TestAudienceFailedPermissionKeepsTheMark(t *testing.T) {
	eachForge(t, setup{}, func(t *testing.T, e *env) {
		e.addComment("alice", "from the author")
		e.addComment("carol", "from someone to ask about")
		comments, err := e.f.Comments(t.Context(), e.ref)
		if err != nil {
			t.Fatal(err)
		}
		e.inject(forgetest.Fault{Method: http.MethodGet, Path: map[string]string{"github": "/permission", "gitlab": "/members/all"}[e.name],
			Status: http.StatusInternalServerError, Times: -1})
		a := watch.Audience{Forge: e.f, Task: e.task(t), Bot: e.bot, Writers: true}
		s, err := a.Sort(t.Context(), comments, 0)
		if err == nil || s.Heard != nil || s.Ignored != nil || s.Mark != 0 || !s.Latest.IsZero() {
			t.Errorf("Sort = %+v, %v; want an error and the mark 0 kept", s, err)
		}
	})
}
