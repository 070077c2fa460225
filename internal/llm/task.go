package llm

import "context"

type taskKey struct{}

// WithTask returns a context whose model requests belong to the task ref
// (its task.Ref in text). It is a log attribute, like the task attribute of
// the engine's logger: a recording of the model's traffic (llm/record)
// files each request under its task, and nothing decides by it.
func WithTask(ctx context.Context, ref string) context.Context {
	return context.WithValue(ctx, taskKey{}, ref)
}

// TaskOf is the task ref WithTask put in ctx; "" when none (doctor's
// probes, a test's own request).
func TaskOf(ctx context.Context) string {
	ref, _ := ctx.Value(taskKey{}).(string)
	return ref
}
