package toolhost

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// errStartAborted cancels the starts under way once one has failed.
var errStartAborted = errors.New("another MCP server failed to start")

// startEach runs start for every config at once and returns the servers in
// config order. The first failure cancels the starts still under way and
// stops the servers that started; the error is that failure (and any other
// that came before the cancellation, not those it caused).
func startEach(ctx context.Context, cfgs []ServerConfig, start func(context.Context, ServerConfig) (*server, error)) ([]*server, error) {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	out := make([]*server, len(cfgs))
	errs := make([]error, len(cfgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() {
			s, err := start(ctx, cfg)
			mu.Lock()
			defer mu.Unlock()
			out[i] = s
			if err != nil && !errors.Is(context.Cause(ctx), errStartAborted) {
				errs[i] = err
				abort(errStartAborted)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = closeAll(slices.DeleteFunc(out, func(s *server) bool { return s == nil }))
		return nil, err
	}
	return out, nil
}

// closeAll stops servers at once, each as server.close does.
func closeAll(servers []*server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lifetime is the life of an owner of server instances: the host, or a
// task's session. It ends once; the starts and calls bound to it are
// cancelled then.
type lifetime struct {
	done chan struct{}
	once sync.Once
}

func newLifetime() *lifetime { return &lifetime{done: make(chan struct{})} }

func (l *lifetime) end() { l.once.Do(func() { close(l.done) }) }

func (l *lifetime) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// bind derives a context that also ends, with cause ErrClosed, when l ends.
func (l *lifetime) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-l.done:
			cancel(ErrClosed)
		case <-stop:
		}
	}()
	return ctx, func() {
		close(stop)
		cancel(context.Canceled)
	}
}
