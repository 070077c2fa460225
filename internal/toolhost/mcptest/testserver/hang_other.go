//go:build !unix

package main

// hang blocks the call for ever.
func hang() { select {} }
