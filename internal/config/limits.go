package config

// The ranges of the config's numbers. Every number has one: a value past it
// is a problem that names the range, so that a slip of the keyboard
// (workers: 1000000000) is caught by `config check` rather than by the
// machine running out of memory. The bounds are far beyond any sensible
// setting; they only keep out values no setup means.
const (
	// MaxWorkers is continuous.consumer.workers at most: each worker runs
	// a task at once, with its tool servers, sandboxed commands and model
	// requests.
	MaxWorkers = 256
	// MaxTimeoutSeconds is a day: the longest wait for one model reply
	// (llm.timeout_seconds), tool call (tools.call_timeout_seconds), lease
	// (lease_seconds, forge_lease_seconds) or reply poll
	// (conversation.poll_seconds).
	MaxTimeoutSeconds = 86400
	// MaxShutdownGraceSeconds is shutdown_grace_seconds at most: an hour,
	// more than a supervisor waits before it kills.
	MaxShutdownGraceSeconds = 3600
	// MaxIntervalMinutes is continuous.producer.interval_minutes at most:
	// a day between passes.
	MaxIntervalMinutes = 1440
	// MaxTimeoutHours is conversation.timeout_hours at most: a year.
	MaxTimeoutHours = 8760
	// MaxResultBytes is tools.max_result_bytes at most: 16 MiB, more than
	// any model's context holds.
	MaxResultBytes = 16 << 20
	// MaxContextLength is llm.*.context_length at most (16 Mi tokens) and
	// MaxReplyTokens llm.*.max_token at most (1 Mi tokens): past the
	// largest windows and replies any model has.
	MaxContextLength = 16 << 20
	MaxReplyTokens   = 1 << 20
	// MaxLLMCalls is max_llm_process_num at most.
	MaxLLMCalls = 100_000
	// MaxCount bounds the planning section's counts, the conversation's
	// rounds, comment_detection.check_interval and workspace.check_rounds
	// (each a number of model calls, actions or rounds) and
	// queue.rabbitmq.max_deliveries.
	MaxCount = 1000
	// MaxAttempts bounds the retries of one thing: an action's attempts,
	// revisions, verification rounds, replans, check rounds.
	MaxAttempts = 100
	// MaxAgeDays is logging.max_age_days at most: ten years.
	MaxAgeDays = 3650
	// MaxMemoryMB is sandbox.memory_mb at most (1 TiB) and
	// MaxMaxProcesses sandbox.max_processes at most.
	MaxMemoryMB     = 1 << 20
	MaxMaxProcesses = 32768
	// MaxDeliveryFileBytes is delivery.max_file_bytes at most: 1 GiB, ten times
	// what GitHub takes in a push.
	MaxDeliveryFileBytes = 1 << 30
)
