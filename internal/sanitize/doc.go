// Package sanitize handles text the agent did not write before it reaches
// the model or leaves the process: Fence marks what people and tools wrote
// as untrusted data, after removing what a reader of the issue cannot see
// (hidden HTML, zero-width, bidirectional and control characters) and
// breaking any tag that would close the fence; the redactor removes
// secrets.
package sanitize
