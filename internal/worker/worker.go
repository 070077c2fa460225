// Package worker moves tasks through their life: the producer discovers
// labelled tasks, claims them and queues them; the consumer takes jobs with
// bounded concurrency, runs the agent on each, and leaves every task in a
// truthful final state on the forge and in the store.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coding-agent/coding-agent/internal/engine"
	"github.com/coding-agent/coding-agent/internal/forge"
	"github.com/coding-agent/coding-agent/internal/queue"
	"github.com/coding-agent/coding-agent/internal/report"
	"github.com/coding-agent/coding-agent/internal/store"
	"github.com/coding-agent/coding-agent/internal/task"
	"github.com/coding-agent/coding-agent/internal/watch"
)

// Runner runs the agent on one task.
type Runner interface {
	Run(ctx context.Context, in engine.Input) (engine.Outcome, error)
}

// Options configure a Worker. Zero values mean defaults.
type Options struct {
	Forge forge.Forge
	Store store.Store
	// Record, when set, records the task's events for its page (the
	// engine's Options.Record): the delivery and each transition.
	Record func(ctx context.Context, ref task.Ref, e store.Event)
	// Page, when set, is where a task's page is (server.public_url with
	// the pages on): its closing and failure comments link it.
	Page  func(task.Ref) string
	Queue queue.Queue // nil: the producer only marks tasks queued in the store
	// Redeliver: the queue keeps its jobs (a broker) and no store backlog
	// re-queues a task left queued, so a job whose task's final label
	// could not be set is released, to come again; otherwise it is acked
	// and the backlog of the next pass brings the task back.
	Redeliver bool
	Agent     Runner
	Labels    task.Labels
	Owner     store.Owner
	// BotName is the forge user the agent posts as; empty → learned from
	// the forge (GET /user).
	BotName string
	// Trust is who may make the agent act: who may label a task, whose
	// comments reach the model on every path.
	Trust watch.Trust
	// NewWatch returns what a run asks at every checkpoint (new comments
	// sorted by a, pause, stop); comments are all those the run started
	// with. nil watches nothing.
	NewWatch func(a *watch.Audience, comments []task.Comment) engine.Watch
	// Workspaces gives each task a checkout and delivers its work; nil:
	// tasks get no workspace.
	Workspaces Workspaces
	// CheckRounds is how many times the output of failing checks goes back
	// to the model before the round ends failed (workspace.check_rounds);
	// the checks are the task's Workspace's (Workspace.Checker).
	CheckRounds int
	// Conversation is the follow-up conversation after a round.
	Conversation Conversation
	// Lang is the language of every notice the worker posts (language).
	Lang report.Lang
	// Workers is how many tasks run at once; 0 → 1.
	Workers int
	// FairClaim: the queue's jobs are taken by this process's consumers
	// alone (the in-process queue), so a discovery pass claims no more
	// tasks than they can start: Workers minus the jobs queued and not yet
	// finished (waiting or in hand). The other tasks stay labelled for the
	// next pass or another host. With a broker every host's consumers take
	// from one queue, each up to its prefetch, and no limit applies.
	FairClaim bool
	// MaxAttempts is how many runs a round of a task may begin before the
	// task is given up, failed saying so: the queue's max_deliveries, so
	// that the dead-letter rule counts a job delivered again and a
	// takeover's new job alike (store.Record.Attempts, one count for
	// both). 0: no limit.
	MaxAttempts int
	// Redact removes secrets from comment bodies.
	Redact func(string) string
	Logger *slog.Logger
	// Shutdown is closed when the process shuts down: no further job is
	// started, and a run that ends on a system error meanwhile is left to
	// resume rather than failed. The checkpoint check (NewWatch) ends the
	// runs in hand at their next checkpoint.
	Shutdown <-chan struct{}
	// Now is the clock; nil → time.Now.
	Now func() time.Time
	// ForgeLease is how long a task this host holds stays its own on the
	// forge without a heartbeat (see holder.go); 0: no holder comment,
	// no heartbeat, no watching other hosts' tasks.
	ForgeLease time.Duration
	// SharedStore: every host that may take a task uses this store (a
	// database every host shares), so a task in processing that it does not
	// hold in hand (queued or running) is held by nobody, and is put up
	// again once it has not changed on the forge for Owner.Lease (see
	// watchHolder). Without it and without ForgeLease, such a task is
	// left alone: another host's own store may hold it.
	SharedStore bool
	// Ran, when set, is told how each run of the agent ended (its
	// engine.End, or "error") and how long it took (metrics).
	Ran func(end string, took time.Duration)
}

// Worker produces and consumes jobs.
type Worker struct {
	o       Options
	active  sync.Map      // task.Ref → *inHand: tasks in hand in this process
	begun   atomic.Uint64 // runs begun (InHand)
	judging sync.Mutex    // Replies runs one at a time
	rounds  atomic.Uint64 // lease renewal rounds begun (holdLeases)
	hold    holding       // holds on the forge (Options.ForgeLease)
	// queued holds the tasks whose jobs this process queued (FairClaim)
	// and its consumers have not finished: a task queued again while its
	// job waits is one job, as it is in the queue. freed gets a signal
	// when one finishes.
	queued sync.Map // task.Ref → struct{}
	freed  chan struct{}
	// refused is the newest refusal of the credentials by the forge that
	// left a task for a later run (see Refused).
	refused atomic.Pointer[error]
}

// New returns a Worker.
func New(o Options) *Worker {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	return &Worker{o: o, freed: make(chan struct{}, 1)}
}

// InHand is how many tasks this process works on now, and how many runs it
// has begun since it started: serve is idle when none is in hand, and says
// so again after a run.
func (w *Worker) InHand() (now int, begun uint64) {
	w.active.Range(func(any, any) bool { now++; return true })
	return now, w.begun.Load()
}

// page is the task's page, "" without one.
func (w *Worker) page(ref task.Ref) string {
	if w.o.Page == nil {
		return ""
	}
	return w.o.Page(ref)
}

// record records an event of the task, when events are recorded.
func (w *Worker) record(ctx context.Context, ref task.Ref, e store.Event) {
	if w.o.Record != nil {
		e.At = w.o.Now()
		w.o.Record(ctx, ref, e)
	}
}

func (w *Worker) log(ref task.Ref) *slog.Logger {
	return w.o.Logger.With("task", ref.String())
}

// logFailure logs a step that failed at error level, unless ctx has ended:
// a step cut short by a shutdown did not fail, and is logged at debug
// level (a stopping serve printed "error: ... context canceled").
func logFailure(ctx context.Context, log *slog.Logger, msg string, args ...any) {
	level := slog.LevelError
	if ctx.Err() != nil {
		level = slog.LevelDebug
	}
	log.Log(ctx, level, msg, args...)
}

// failure is err when it is a failure of the store (store.IsFailure), which
// stops the worker; nil otherwise.
func failure(err error) error {
	if store.IsFailure(err) {
		return err
	}
	return nil
}

// Refused is the newest refusal of the process's credentials by the forge
// (wrapping forge.ErrAuth) that left a task queued for a later run, naming
// the task; nil when there was none. `run` fails with it: what it took
// was not finished. `serve` goes on: the forge adapter waits before it
// asks again, and the next passes bring the task back.
func (w *Worker) Refused() error {
	if err := w.refused.Load(); err != nil {
		return *err
	}
	return nil
}

// refuse records err when it is the forge refusing the credentials, which
// left ref for a later run.
func (w *Worker) refuse(ref task.Ref, err error) {
	if errors.Is(err, forge.ErrAuth) {
		err = fmt.Errorf("%s is left queued for the next run: %w", ref, err)
		w.refused.Store(&err)
	}
}

// botName is the configured bot, else the token's user (the adapters ask
// the forge once per process).
func (w *Worker) botName(ctx context.Context) (string, error) {
	if w.o.BotName != "" {
		return w.o.BotName, nil
	}
	bot, err := w.o.Forge.BotUser(ctx)
	if err != nil {
		return "", fmt.Errorf("learning the bot's user name: %w", err)
	}
	return bot, nil
}

// audience is the audience rule for t, worked on as bot; writers says
// whether people with write access are heard.
func (w *Worker) audience(t task.Task, bot string, writers bool) *watch.Audience {
	return &watch.Audience{Forge: w.o.Forge, Task: t, Bot: bot, Trust: w.o.Trust, Writers: writers}
}

// poster posts the worker's comments on ref, in its language.
func (w *Worker) poster(ref task.Ref, log *slog.Logger) *report.Poster {
	return report.NewPoster(report.PosterOptions{Commenter: w.o.Forge, Ref: ref, Redact: w.o.Redact, Logger: log, Lang: w.o.Lang})
}
