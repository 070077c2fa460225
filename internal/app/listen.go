package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/server"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/ui"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// serverShutdown bounds how long the listener waits for the requests in
// flight when serve stops.
const serverShutdown = 5 * time.Second

// wakeups are what webhooks signal to serve's loops. Each signal is a
// buffer of one: deliveries that come while a pass runs make one more
// pass, not one each.
type wakeups struct {
	produce chan struct{}
	replies chan struct{}
	mu      sync.Mutex
	runs    map[string]*watch.Watcher // task.Ref key → the checks of its run in hand
}

func newWakeups() *wakeups {
	return &wakeups{produce: make(chan struct{}, 1), replies: make(chan struct{}, 1), runs: map[string]*watch.Watcher{}}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// refKey is ref as webhooks and runs both name it: GitHub's and GitLab's
// paths are case-insensitive.
func refKey(ref task.Ref) string { return strings.ToLower(ref.String()) }

// Labelled wakes the producer.
func (w *wakeups) Labelled(task.Ref) { signal(w.produce) }

// Commented makes the run in hand of ref check at its next checkpoint, and
// wakes the judge of the tasks that await a reply.
func (w *wakeups) Commented(ref task.Ref) {
	w.mu.Lock()
	run := w.runs[refKey(ref)]
	w.mu.Unlock()
	if run != nil {
		run.Nudge()
	}
	signal(w.replies)
}

// watching registers the checks of a run until the run closes them.
func (w *wakeups) watching(c *watch.Watcher) engine.Watch {
	key := refKey(c.Ref())
	w.mu.Lock()
	w.runs[key] = c
	w.mu.Unlock()
	return watched{Watcher: c, done: func() {
		w.mu.Lock()
		if w.runs[key] == c {
			delete(w.runs, key)
		}
		w.mu.Unlock()
	}}
}

// watched is a run's checks that leave the register when the run ends.
type watched struct {
	*watch.Watcher
	done func()
}

func (w watched) Close() {
	w.done()
	w.Watcher.Close()
}

// listen starts serve's HTTP listener when server.listen is set; stop
// closes it. Without server.listen it does nothing.
func (a *App) listen() (stop func(), err error) {
	s := a.cfg.Server
	if s.Listen == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (server.listen): %w", s.Listen, err)
	}
	interval := a.cfg.Continuous.Producer.Interval()
	ready := server.Readiness{Store: a.storeReadable, ForgeSeen: a.metrics.ForgeSeen, Within: interval + forgeTimeout}
	var pages http.Handler
	if s.UIToken != "" {
		if pages, err = ui.New(ui.Options{Store: a.store, Token: string(s.UIToken), Logger: a.Log, Now: a.o.Clock}); err != nil {
			l.Close()
			return nil, fmt.Errorf("the task pages (server.ui_token): %w", err)
		}
	}
	h := server.New(server.Options{Webhooks: a.webhooks(),
		Labels: a.cfg.Labels(), Watched: a.cfg.Watches, Self: a.isBot, Events: a.wake,
		Delivered: a.metrics.WebhookDelivered, Ready: ready.Check, Metrics: a.metrics.Handler(), Pages: pages, Logger: a.Log})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("the HTTP listener stopped", "address", l.Addr().String(), "error", err)
		}
	}()
	a.Log.Info("listening", "address", l.Addr().String(), "github_webhook", s.GitHubWebhookSecret != "",
		"gitlab_webhook", s.GitLabWebhookToken != "", "task_pages", pages != nil)
	if a.o.Listening != nil {
		a.o.Listening(l.Addr())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), serverShutdown)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			a.Log.Warn("closing the HTTP listener", "error", err)
		}
		<-done
	}, nil
}

// botTimeout bounds learning the bot's name from the forge (once).
const botTimeout = 10 * time.Second

// isBot reports whether author is the bot: bot_name, else the token's
// user as the forge says (asked once per process).
func (a *App) isBot(author string) bool {
	bot := a.cfg.BotName()
	if bot == "" {
		ctx, cancel := context.WithTimeout(context.Background(), botTimeout)
		defer cancel()
		var err error
		if bot, err = a.forge.BotUser(ctx); err != nil {
			a.Log.Warn("learning the bot's name to pass over its own comments' webhooks", "error", err)
			return false
		}
	}
	return strings.EqualFold(author, bot)
}

// readyProbe is the task /readyz reads: none is ever stored, so the read
// is one indexed lookup that finds nothing.
var readyProbe = task.Ref{Forge: task.GitHub, Repo: "coding-agent/readyz", Kind: task.Issue, Number: 0}

// storeReadable reads the store: a task it does not have is an answer.
func (a *App) storeReadable(ctx context.Context) error {
	_, err := a.store.Get(ctx, readyProbe)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
