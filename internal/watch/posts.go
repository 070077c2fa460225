package watch

import (
	"context"
	"sync"

	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/task"
)

// Posts counts the comments this process posted on each task, so that a
// Watcher can tell a thread that grew only by the bot's own comments (its
// progress reports) without reading the comments. The zero value is ready
// to use.
type Posts struct {
	mu sync.Mutex
	n  map[task.Ref]int
}

// Wrap returns f with every comment posted through it counted.
func (p *Posts) Wrap(f forge.Forge) forge.Forge { return counted{Forge: f, posts: p} }

// Count is how many comments were posted on ref so far.
func (p *Posts) Count(ref task.Ref) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[ref]
}

func (p *Posts) add(ref task.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[task.Ref]int{}
	}
	p.n[ref]++
}

// counted is a forge whose posted comments are counted. A post that fails
// is not counted, even if it landed: the Watcher then reads the comments,
// as it would without the count.
type counted struct {
	forge.Forge
	posts *Posts
}

func (c counted) PostComment(ctx context.Context, ref task.Ref, body string) (task.Comment, error) {
	cm, err := c.Forge.PostComment(ctx, ref, body)
	if err == nil {
		c.posts.add(ref)
	}
	return cm, err
}
