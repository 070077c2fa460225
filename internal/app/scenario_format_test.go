package app_test

import (
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

// The scenario format is strict: whatever the runner would not understand
// fails the file with a message that says what is wrong, never ignored.
func TestScenarioFormatIsStrict(t *testing.T) {
	t.Parallel() // runs beside the others (see README, Tests)
	const (
		plain    = "-- setup --\nforge: github\nkind: issue\nprovider: openai\n"
		planning = plain + "planning: true\n"
		want     = "-- want --\nlabels: [bug, coding agent done]\n"
	)
	for _, c := range []struct{ name, text, err string }{
		{"valid plain", "Proves.\n" + plain + "-- reply --\nhi\n" + want, ""},
		{"valid planning", "Proves.\n" + planning + "-- reply [pre-planning] --\n{}\n-- call fs/write_file [execution a1] --\n{\"$comment\": \"c\"}\n" + want, ""},
		{"no comment", plain + want, "must say what the scenario proves"},
		{"setup not first", "Proves.\n" + want + plain, "the first section must be setup"},
		{"unknown section", "Proves.\n" + plain + "-- replies --\nhi\n" + want, "unknown section"},
		{"unknown setup key", "Proves.\n" + plain + "nativ: true\n" + want, `unknown field "nativ"`},
		{"duplicate setup key", "Proves.\n" + plain + "forge: gitlab\n" + want, `mapping key "forge" already defined`},
		{"bad forge", "Proves.\n-- setup --\nforge: gitea\nkind: issue\nprovider: openai\n" + want, `forge "gitea"`},
		{"kind of the other forge", "Proves.\n-- setup --\nforge: github\nkind: merge_request\nprovider: openai\n" + want, `kind "merge_request"`},
		{"fault without status", "Proves.\n" + plain + "faults: [{path: /notes}]\n" + want, "fault 1: status 0"},
		{"unknown config key", "Proves.\n" + plain + "-- config.yaml --\nmax_llm_proces_num: 6\n" + want, `unknown field "max_llm_proces_num"`},
		{"config after a reply", "Proves.\n" + plain + "-- reply --\nhi\n-- config.yaml --\nlanguage: en\n" + want, "right after setup"},
		{"phase in the plain loop", "Proves.\n" + plain + "-- reply [planning] --\nhi\n" + want, "planning mode only"},
		{"no phase in planning", "Proves.\n" + planning + "-- reply --\n{}\n" + want, "every reply says where it is asked"},
		{"unknown phase", "Proves.\n" + planning + "-- reply [planing] --\n{}\n" + want, "[planing]: want"},
		{"execution without action", "Proves.\n" + planning + "-- reply [execution] --\n{}\n" + want, "[execution]: want"},
		{"call without server", "Proves.\n" + plain + "-- call write_file --\n{}\n" + want, "unknown section"},
		{"call args not an object", "Proves.\n" + plain + "-- call fs/write_file --\n[1]\n" + want, "JSON object of arguments"},
		{"comment not a string", "Proves.\n" + plain + "-- call fs/write_file --\n{\"$comment\": 1}\n" + want, `"$comment" must be a string`},
		{"no want", "Proves.\n" + plain + "-- reply --\nhi\n", "no want section"},
		{"section after want", "Proves.\n" + plain + want + "-- reply --\nhi\n", "want must be the last section"},
		{"unknown want key", "Proves.\n" + plain + want + "comment: {count: 0}\n", `unknown field "comment"`},
		{"unknown nested want key", "Proves.\n" + plain + want + "record: {state: done}\n", `unknown field "state"`},
		{"no labels", "Proves.\n" + plain + "-- want --\nrecord: {status: done}\n", "labels is required"},
		{"history in the plain loop", "Proves.\n" + plain + want + "history: []\n", "history needs planning"},
		{"history entry without type", "Proves.\n" + planning + want + "history: [{action: a1}]\n", "history entry 1: type is required"},
		{"request 0", "Proves.\n" + plain + want + "requests: {0: {last_message: {contains: [x]}}}\n", "0 is no request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseArchive(txtar.Parse([]byte(c.text)))
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one containing %q", err, c.err)
			}
		})
	}
}
