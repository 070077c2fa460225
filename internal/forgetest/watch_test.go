package forgetest

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// A Watch function sees each request before and after it is served, and a
// request it drops gets no answer: dropped before, nothing happened; after,
// the comment is there though the client never heard so. Kept, the request
// is answered as without a watch, the body intact for the handler.
func TestWatchDropsBeforeOrAfterServing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dropAt    int // 0 keeps it; 1 drops it before serving, 2 after
		wantStore int
	}{{"kept", 0, 1}, {"dropped before", 1, 0}, {"dropped after", 2, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGitHub(t)
			n := g.AddIssue("acme/app", IssueSeed{Title: "t"})
			var mu sync.Mutex
			var seen []Call
			g.Watch(func(c Call) bool {
				if c.Method != "POST" {
					return true
				}
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, c)
				return len(seen) != tc.dropAt
			})
			req, err := http.NewRequest("POST", g.URL()+"/repos/acme/app/issues/1/comments", strings.NewReader(`{"body":"hello"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+g.Token)
			resp, err := g.Client().Do(req)
			if tc.dropAt == 0 {
				if err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("kept request: %v %v", resp, err)
				}
				resp.Body.Close()
			} else if err == nil {
				resp.Body.Close()
				t.Fatalf("a dropped request was answered %d", resp.StatusCode)
			}
			g.Watch(nil)
			mu.Lock()
			defer mu.Unlock()
			if got := len(g.Comments("acme/app", n)); got != tc.wantStore {
				t.Errorf("%d comments stored, want %d", got, tc.wantStore)
			}
			wantSeen := max(tc.dropAt, 2)
			if tc.dropAt == 1 {
				wantSeen = 1
			}
			if len(seen) != wantSeen || string(seen[0].Body) != `{"body":"hello"}` || seen[0].Served || len(seen) > 1 && !seen[1].Served {
				t.Errorf("the watch saw %+v", seen)
			}
		})
	}
}
