package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version and commit are stamped at build time:
//
//	go build -ldflags "-X main.version=v0.1.0 -X main.commit=$(git rev-parse HEAD)"
//
// Unstamped, they come from the build information: the module's version
// (set by go install ...@v0.1.0) and the VCS revision (set by go build in
// a clone).
var version, commit string

// versionLine is what -version and kafkasink version print: the version,
// the commit and the Go version that built the program.
func versionLine() string {
	v, c, dirty := version, commit, false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				dirty = commit == "" && s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	} else if dirty {
		c += " (modified)"
	}
	return fmt.Sprintf("kafkasink %s, commit %s, %s", v, c, runtime.Version())
}

// command splits the subcommand off args: run (the default), check,
// offsets, version or help; -version anywhere before a "--" is the version
// command too.
func command(args []string) (string, []string) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-version" || a == "--version" {
			return "version", nil
		}
	}
	if len(args) > 0 {
		switch args[0] {
		case "run", "check", "offsets", "backfill", "version", "help":
			return args[0], args[1:]
		}
	}
	return "run", args
}

// usageHead is the start of the usage: what the program does and how it
// is run.
const usageHead = `kafkasink streams PostgreSQL logical replication into Kafka, exactly once.

Usage:
  kafkasink [run] [flags]   stream (the default)
  kafkasink check [-o json] [flags]
                            connect and check every setting, server and right; change nothing
  kafkasink offsets show [-o json] [flags]
                            print the checkpoint, its cursor, the slot and the lease's holder
  kafkasink offsets reset -to current|resnapshot|<LSN> [-yes] [flags]
                            move the checkpoint; refused while an instance holds the lease
  kafkasink version         print the version (also -version)
  kafkasink help            print every flag with its full description
  kafkasink backfill ...    ask a running instance (-http-addr) for a backfill

Every flag can also be set by its environment variable ($KAFKASINK_<FLAG>,
upper case, '_' for '-' and '.') or by its key in the -config YAML file
('_' for '-' and '.'); flags win over the environment, which wins over
the file. Exit status: 0 stopped by a signal, 1 a runtime error, 2 a
configuration error (all problems are listed, nothing is started), 3
another instance took over. check and offsets exit 0 when done, 1 when
a check failed or a reset was refused or failed, 2 on a configuration
error.
`

// printUsage writes the usage to w, the flags grouped by topic: each in
// one line (its description up to the first ';'), or with full, each
// with its whole description and default.
func printUsage(w io.Writer, fs *flag.FlagSet, settings map[string]setting, full bool) {
	fmt.Fprint(w, usageHead)
	groups := make(map[string][]*flag.Flag)
	fs.VisitAll(func(f *flag.Flag) { groups[settings[f.Name].group] = append(groups[settings[f.Name].group], f) })
	for _, g := range append([]string{""}, flagGroups...) {
		title := g
		if g == "" {
			title = "Configuration file"
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range groups[g] {
			typ, usage := flag.UnquoteUsage(f)
			name := "-" + f.Name
			if typ != "" {
				name += " " + typ
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			if !full {
				fmt.Fprintf(w, "  %-34s %s%s\n", name, summary(strings.TrimSuffix(usage, " ($"+settings[f.Name].env+")")), def)
				continue
			}
			fmt.Fprintf(w, "  %s\n    \t%s%s\n", name, usage, def)
		}
	}
	if !full {
		fmt.Fprintln(w, "\nkafkasink help prints each flag's full description; docs/program.md is the reference.")
	}
}

// summaryMax bounds a summary's length, so that each flag takes a line.
const summaryMax = 90

// summary is the start of a flag's description: up to its first "; "
// outside parentheses, cut at a word to at most summaryMax bytes.
func summary(usage string) string {
	depth := 0
	for i := 0; i < len(usage); i++ {
		switch usage[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ';':
			if depth == 0 && strings.HasPrefix(usage[i:], "; ") {
				usage = usage[:i]
			}
		}
	}
	if len(usage) <= summaryMax {
		return usage
	}
	cut := strings.LastIndexByte(usage[:summaryMax], ' ')
	return strings.TrimRight(usage[:cut], ",:;( ") + " ..."
}
