package main

import (
	"bytes"
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
)

// TestUsageIsShortAndGrouped: -h lists every flag once, on one line,
// under its topic's heading, in flagGroups' order; kafkasink help gives
// each its full description.
func TestUsageIsShortAndGrouped(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, noEnv, &out); code != 0 {
		t.Fatalf("-h: status %d", code)
	}
	fs, settings := defineFlags(new(options))
	lines := strings.Split(out.String(), "\n")
	group, seen := "", make(map[string]bool)
	var headings []string
	for _, l := range lines {
		switch {
		case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
			group = strings.TrimSuffix(l, ":")
			headings = append(headings, group)
		case strings.HasPrefix(l, "  -"):
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "  -"), " ")
			s, ok := settings[name]
			switch {
			case !ok:
				t.Errorf("-h lists -%s, which is not a flag", name)
			case seen[name]:
				t.Errorf("-h lists -%s twice", name)
			case s.group != group && !(s.group == "" && group == "Configuration file"):
				t.Errorf("-h lists -%s under %q, want %q", name, group, s.group)
			}
			seen[name] = true
			if len(l) > 160 {
				t.Errorf("-h: the line of -%s is %d bytes long, want one short line:\n%s", name, len(l), l)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			t.Errorf("-h does not list -%s", f.Name)
		}
		if g := settings[f.Name].group; f.Name != "config" && f.Name != "debezium-config" && !slices.Contains(flagGroups, g) {
			t.Errorf("-%s is in no topic of flagGroups (%q)", f.Name, g)
		}
	})
	if want := append([]string{"Usage", "Configuration file"}, flagGroups...); !slices.Equal(headings, want) {
		t.Errorf("-h headings %q, want %q", headings, want)
	}

	var full bytes.Buffer
	printUsage(&full, fs, settings, true)
	if u := fs.Lookup("keyless-tables").Usage; !strings.Contains(full.String(), u) {
		t.Errorf("kafkasink help does not give -keyless-tables' full description %q", u)
	}
}

// TestBadValueIsOneLine: a bad flag value prints the problem, in one
// line naming the flag and the values it takes, and no usage.
func TestBadValueIsOneLine(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-pg", "postgres://h/db", "-brokers", "b:9092", "-slot-gap", "ignore"}, noEnv, &out); code != 2 {
		t.Fatalf("status %d, want 2", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `-slot-gap "ignore": want refuse, resnapshot or accept`) {
		t.Errorf("output %q, want a heading and one line naming -slot-gap and its values", out.String())
	}
}
