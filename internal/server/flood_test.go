package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coding-agent/coding-agent/internal/server"
)

// filler reads as endless 'x': a body made as it is sent, so that the
// sender holds none of it.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// flood is one kind of hostile delivery: its path, its headers, and
// whether its length is said (Content-Length) or not (chunked).
type flood struct {
	name    string
	path    string
	header  map[string]string
	chunked bool
}

// floods are deliveries without the forge's proof, as someone who can
// reach the listener sends them.
var floods = []flood{
	{name: "unsigned", path: "/webhooks/github", header: map[string]string{"X-GitHub-Event": "issues"}},
	{name: "wrongly signed issues", path: "/webhooks/github",
		header: map[string]string{"X-GitHub-Event": "issues", "X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}},
	{name: "wrongly signed issues, chunked", path: "/webhooks/github", chunked: true,
		header: map[string]string{"X-GitHub-Event": "issues", "X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}},
	{name: "wrongly signed push, chunked", path: "/webhooks/github", chunked: true,
		header: map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}},
	{name: "GitLab without its token", path: "/webhooks/gitlab", header: map[string]string{"X-Gitlab-Event": "Issue Hook"}},
}

// send posts n deliveries of f at once, each with a body of size bytes,
// and returns their statuses; 0 is a post the listener answered and
// closed before its body was all sent.
func (f flood) send(t testing.TB, base string, n int, size int64) []int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}, Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, base+f.path, io.LimitReader(filler{}, size))
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = size
			if f.chunked {
				req.ContentLength = -1
			}
			for k, v := range f.header {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	return statuses
}

const (
	floodPosts = 8
	floodSize  = 24 << 20
)

// Eight deliveries of 24 MB each at once, without the forge's proof, are
// refused having made the listener allocate (so keep) at most what a
// delivery may hold before its proof is checked (1 MB each, the kept
// cap), not their bodies: reading them whole took the process from 36 MB
// to 443 MB. Allocation, counted by the runtime, bounds what was kept.
func TestUnverifiedBodiesAreNotKept(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Options{Webhooks: webhooks(ghSecret, glToken), Labels: labels, Events: &events{}}))
	t.Cleanup(srv.Close)
	// What a post may keep before its proof is checked (1 MB, in blocks
	// of 32 KB), and 4 MB for the connections, their buffers and the
	// senders.
	const bound = floodPosts*(1<<20+32<<10) + 4<<20
	for _, f := range floods {
		t.Run(f.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			statuses := f.send(t, srv.URL, floodPosts, floodSize)
			runtime.ReadMemStats(&after)
			for _, s := range statuses {
				if s != 0 && s != http.StatusUnauthorized && s != http.StatusRequestEntityTooLarge {
					t.Errorf("statuses %v, want each refused (401 or 413)", statuses)
					break
				}
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d posts of %d MB: %.1f MB allocated in all, statuses %v", floodPosts, floodSize>>20, float64(alloc)/(1<<20), statuses)
			if alloc > bound {
				t.Errorf("%.1f MB allocated for %d unverified posts of %d MB, want at most %d MB",
					float64(alloc)/(1<<20), floodPosts, floodSize>>20, bound>>20)
			}
		})
	}
}

// BenchmarkUnverifiedFlood sends the flood of TestUnverifiedBodiesAreNotKept
// (each kind in turn, eight posts of 24 MB at once) and reports the peak
// of the heap in use above where it started (sampled every millisecond)
// and the bytes allocated per flood; on Linux also the process's peak
// resident set (VmHWM) at the end, which counts the whole test binary.
func BenchmarkUnverifiedFlood(b *testing.B) {
	srv := httptest.NewServer(server.New(server.Options{Webhooks: webhooks(ghSecret, glToken), Labels: labels, Events: &events{}}))
	b.Cleanup(srv.Close)
	var peak, alloc uint64
	for b.Loop() {
		for _, f := range floods {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			stop, sampled := make(chan struct{}), make(chan uint64)
			go func() {
				top := before.HeapInuse
				tick := time.NewTicker(time.Millisecond)
				defer tick.Stop()
				for {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					top = max(top, m.HeapInuse)
					select {
					case <-stop:
						sampled <- top
						return
					case <-tick.C:
					}
				}
			}()
			f.send(b, srv.URL, floodPosts, floodSize)
			close(stop)
			peak = max(peak, <-sampled-before.HeapInuse)
			runtime.ReadMemStats(&after)
			alloc += after.TotalAlloc - before.TotalAlloc
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MB/op")
	if hwm := vmHWM(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<10), "VmHWM-MB")
	}
}

// vmHWM is the process's peak resident set in kB (Linux); 0 elsewhere.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
