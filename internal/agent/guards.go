package agent

// repeatWarnAt is how many identical tool calls in a row make the result
// carry a warning to the model.
const repeatWarnAt = 3

// repeats counts identical consecutive calls: the run length ending with key.
func repeats(lastKey string, lastRun int, key string) int {
	if key == lastKey {
		return lastRun + 1
	}
	return 1
}
