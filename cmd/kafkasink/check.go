package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// status is how one check of kafkasink check came out.
type status string

const (
	statusOK      status = "ok"
	statusWarn    status = "warn"    // works, but an operator should know (reported, never failing)
	statusFail    status = "fail"    // the pipeline cannot work, or not safely, as set up
	statusUnknown status = "unknown" // the check could not tell; Detail says why
)

// finding is one check's result, a row of check's table and an element
// of its JSON (-o json).
type finding struct {
	Area   string `json:"area"`  // "postgresql", "kafka" or "schema registry"
	Check  string `json:"check"` // what was checked, such as "wal_level"
	Status status `json:"status"`
	Detail string `json:"detail"`        // what was found
	Fix    string `json:"fix,omitempty"` // how to fix it, for warn, fail and unknown
	// BlocksStart marks a failure that no waiting cures (wal_level, a
	// missing right): the run command stops on it with exit status 2
	// instead of starting and failing later.
	BlocksStart bool `json:"blocks_start,omitempty"`
}

// checkTarget is what the checks look at: the program's Configs, and the
// options they do not carry.
type checkTarget struct {
	kcfg kafkasink.Config
	pcfg pgcdc.Config
	o    *options
}

// checkTimeout bounds each side's checks in the check command: an
// unreachable server is a finding, not a hang. startCheckTimeout is the
// bound when run checks before it starts, shorter, since a server that
// is down there is the run's retries' business.
const (
	checkTimeout      = 20 * time.Second
	startCheckTimeout = 5 * time.Second
)

// preflight runs every check of t: PostgreSQL's, Kafka's and, when the
// encoder needs one, the Schema Registry's, each side within timeout.
// Each side's checks stop at its first unreachable server, reported as a
// failure.
func preflight(ctx context.Context, t checkTarget, timeout time.Duration) []finding {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	findings := checkPostgreSQL(pctx, t)
	kctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	findings = append(findings, checkKafka(kctx, t)...)
	return append(findings, checkRegistry(kctx, t)...)
}

// check is the check command: it reads the configuration as run does,
// then connects and reports every problem with its fix, changing
// nothing; -o json prints the findings as JSON. Exit status: 0 when no
// check failed, 1 when one did, 2 for a configuration error (as run).
func check(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	own := map[string]string{"o": "table"}
	args, err := takeFlags(args, own)
	if err == nil {
		err = outputProblem(own["o"])
	}
	if err != nil {
		fmt.Fprintln(stderr, "kafkasink check:", err)
		return 2
	}
	o, problems, exit, ok := parseArgs(args, getenv, stderr)
	if !ok {
		return exit
	}
	kcfg, pcfg, err := o.configs(slog.New(slog.DiscardHandler))
	if problems = append(problems, problemsOf(err)...); problems != nil {
		printProblems(stderr, configError(problems))
		return 2
	}
	findings := preflight(ctx, checkTarget{kcfg: kcfg, pcfg: pcfg, o: o}, checkTimeout)
	if own["o"] == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(findings)
	} else {
		printFindings(stdout, findings)
	}
	for _, f := range findings {
		if f.Status == statusFail {
			return 1
		}
	}
	return 0
}

// takeFlags takes the command's own flags (own's keys, with their
// defaults as values; "false" marks a boolean) out of args, which are
// run's flags otherwise, and sets own's values from them.
func takeFlags(args []string, own map[string]string) ([]string, error) {
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), nil
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		def, ok := own[name]
		if !strings.HasPrefix(a, "-") || !ok {
			rest = append(rest, a)
			continue
		}
		switch {
		case def == "false" || def == "true":
			if !hasValue {
				value = "true"
			} else if value != "true" && value != "false" {
				return nil, fmt.Errorf("-%s=%s: want true or false", name, value)
			}
		case !hasValue && i+1 == len(args):
			return nil, fmt.Errorf("-%s needs a value", name)
		case !hasValue:
			i++
			value = args[i]
		}
		own[name] = value
	}
	return rest, nil
}

// printFindings writes findings as a table, one line each, and the fix
// on the line below a finding that has one.
func printFindings(w io.Writer, findings []finding) {
	var failed, warned, unknown int
	for _, f := range findings {
		fmt.Fprintf(w, "%-7s %-16s %-34s %s\n", strings.ToUpper(string(f.Status)), f.Area, f.Check, f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(w, "%-7s %-16s %-34s fix: %s\n", "", "", "", f.Fix)
		}
		switch f.Status {
		case statusFail:
			failed++
		case statusWarn:
			warned++
		case statusUnknown:
			unknown++
		}
	}
	fmt.Fprintf(w, "%d checks: %d failed, %d warnings, %d could not tell\n", len(findings), failed, warned, unknown)
}

// preflightAtStart runs the checks before run waits for its lease: a
// certain failure is returned, as a configuration error (exit status 2);
// every other failure, warning or check that could not tell is logged,
// and the run goes on (a server down now may be up when the lease is
// taken, and the run's own retries say so).
func preflightAtStart(ctx context.Context, t checkTarget, logger *slog.Logger) error {
	var certain []string
	for _, f := range preflight(ctx, t, startCheckTimeout) {
		switch {
		case f.Status == statusOK:
		case f.Status == statusFail && f.BlocksStart:
			certain = append(certain, fmt.Sprintf("%s %s: %s: %s", f.Area, f.Check, f.Detail, f.Fix))
		default:
			logger.Warn("pre-flight check", "area", f.Area, "check", f.Check, "status", string(f.Status), "detail", f.Detail, "fix", f.Fix)
		}
	}
	if certain != nil {
		return &kafkasink.ConfigError{Problems: certain}
	}
	return nil
}

// checkRegistry checks that the Schema Registry answers, when the
// encoder registers schemas there.
func checkRegistry(ctx context.Context, t checkTarget) []finding {
	switch t.o.encoder {
	case "avro", "json-schema", "debezium-avro":
	default:
		return nil
	}
	f := finding{Area: "schema registry", Check: "connection", Status: statusOK, Detail: t.o.schemaRegistry.url}
	rc, err := t.o.schemaRegistry.config()
	if err == nil {
		_, err = rc.Registry.Subjects(ctx)
	}
	if err != nil {
		f.Status, f.Detail = statusFail, fmt.Sprintf("%s: %v", t.o.schemaRegistry.url, err)
		f.Fix = "check -schema-registry (the URL, with the ccompat path for Apicurio), its TLS and authentication flags, and that the registry is up"
	}
	return []finding{f}
}

// outputProblem is what is wrong with -o format, or nil.
func outputProblem(format string) error {
	if format != "table" && format != "json" {
		return fmt.Errorf("-o %q: want table or json", format)
	}
	return nil
}
