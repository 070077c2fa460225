package app

import (
	"maps"
	"slices"
	"testing"

	"github.com/coding-agent/coding-agent/internal/config"
	"github.com/coding-agent/coding-agent/internal/task"
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

// Every forge the configuration accepts has an entry in the app's
// registry and in task.Forges, each with every fact.
func TestEveryForgeIsRegistered(t *testing.T) {
	want := slices.Sorted(slices.Values(config.Forges))
	if got := slices.Sorted(maps.Keys(forges)); !slices.Equal(got, want) {
		t.Fatalf("the app's forges %q, the configuration's %q", got, want)
	}
	if got := slices.Sorted(maps.Keys(task.Forges)); !slices.Equal(got, want) {
		t.Fatalf("task.Forges %q, the configuration's %q", got, want)
	}
	for name, k := range forges {
		if (k.open == nil && k.Open == nil) || k.Name != name || k.GitUser == "" || k.BotAdvice == "" || k.Hooks == nil {
			t.Errorf("forge %s lacks a fact: %+v", name, k.Kind)
		}
		if _, key := (&config.Config{TaskSource: name}).Webhook(); key == "" {
			t.Errorf("the configuration's section of %s names no webhook secret", name)
		}
		if f := task.Forges[name]; f.Change == "" || f.ChangeKind == "" || f.RepoForm == "" || f.MaxComment == 0 {
			t.Errorf("task.Forges[%s] lacks a fact: %+v", name, f)
		}
	}
}
