package app

import (
	"maps"
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
)

// Every provider the configuration accepts has an entry in the registry,
// and the entry has every fact: a provider left out, or a fact left
// unset, would run without a client, a window or a model list.
func TestEveryProviderIsRegistered(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(providers)), slices.Sorted(slices.Values(config.Providers)); !slices.Equal(got, want) {
		t.Fatalf("registered providers %q, the configuration's %q", got, want)
	}
	for name, p := range providers {
		if p.settings == nil || p.window == nil || p.client == nil || p.served == nil || p.formatField == "" {
			t.Errorf("provider %s lacks a fact: %+v", name, p)
		}
	}
}
