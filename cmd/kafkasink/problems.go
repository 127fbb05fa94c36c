package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// Configuration errors speak in flags: each problem names the flag at
// fault, and, so that it can be fixed wherever it was set, the flag's key
// in the configuration file and its environment variable. The library's
// validations (kafkasink.Config.Validate, pgcdc.Config.Validate,
// pgcdc.LeaseConfig.Validate) name its Config fields instead; speakFlags
// rewrites their problems with libraryNames.

// libraryNames maps each name the library's configuration errors give a
// setting (a Config field or one of its values, after the package and
// Config qualifiers are dropped) to the program's: a flag, or for a
// setting the program derives or does not offer, a phrase saying what to
// do here. TestLibraryNamesAreFieldsAndFlags keeps it true to the
// library's fields and the program's flags; TestNoLibraryNamesReachTheUser
// drives every validation the program can fail and finds none left.
var libraryNames = []struct{ name, program string }{
	// kafkasink.Config
	{"Brokers", "-brokers"},
	{"SinkID", "-sink-id"},
	{"Mode", "-mode"},
	{"TransactionTimeout", "-transaction-timeout"},
	{"CommitTimeout", "the commit timeout (a third of -transaction-timeout)"},
	{"CheckpointTopic", "-checkpoint-topic"},
	{"DeadLetterTopic", "-dead-letter-topic"},
	{"Topics.Template", "-topic-template"},
	{"Topics.Prefix", "-topic-prefix"},
	{"Topics.Routes", "-topic-routes"},
	{"Topics.Partitions", "-partitions"},
	{"Topics.ReplicationFactor", "-replication-factor"},
	{"Encoder", "-encoder"},
	{"KeyFormat", "-key-format"},
	{"KeyJSON", "json"},
	{"Headers", "-headers"},
	{"AnnotationsIn", "-annotations-in"},
	{"Annotations", "-annotations"},
	{"AnnotateValue", "-annotations-in value"},
	{"AnnotateHeaders", "-annotations-in headers"},
	{"AnnotateBoth", "-annotations-in both"},
	{"TLS.CAFile", "-tls-ca"},
	{"TLS.CertFile", "-tls-cert"},
	{"TLS.KeyFile", "-tls-key"},
	{"TLS.ServerName", "-tls-server-name"},
	{"SASL.Mechanism", "-sasl-mechanism"},
	{"Username", "-sasl-user"},
	{"Password", "a password (-sasl-password-file or $KAFKASINK_SASL_PASSWORD)"},
	// debezium.Encoder
	{"TransactionTopic", "-transaction.topic"},
	{"SkippedOperations", "-skipped.operations"},
	{"WriteAnnotations", "-debezium-annotations"},
	{"MatchDebeziumLosses", "-debezium-match-losses"},
	{"DebeziumEncoder", "-encoder debezium"},
	// pgcdc.Config and pgcdc.LeaseConfig
	{"ConnString", "-pg"},
	{"Slot", "-slot"},
	{"Publication", "-publication"},
	{"Tables", "-tables"},
	{"CreatePublication", "-create"},
	{"CreateSlot", "-create"},
	{"AcceptPublicationTables", "-accept-publication-tables"},
	{"KeylessTables", "-keyless-tables"},
	{"SnapshotWorkers", "-snapshot-workers"},
	{"BackfillAddedTables", "-backfill-added-tables"},
	{"KeyColumns", "-key-columns"},
	{"SchemaIncludeList", "-schema.include.list"},
	{"SchemaExcludeList", "-schema.exclude.list"},
	{"TableIncludeList", "-table.include.list"},
	{"TableExcludeList", "-table.exclude.list"},
	{"ColumnIncludeList", "-column.include.list"},
	{"ColumnExcludeList", "-column.exclude.list"},
	{"SlotGap", "-slot-gap"},
	{"NoFailoverSlot", "-failover-slot=false"},
	{"FailoverStandby", "-failover-standby"},
	{"SpoolMaxBytes", "-spool-max-bytes"},
	{"SpoolDir", "the spool directory ($TMPDIR)"},
	{"BatchMaxEvents", "-batch-max-events"},
	{"BatchMaxBytes", "-batch-max-bytes"},
	{"BatchMaxWait", "-batch-max-wait"},
	{"Timeout", "-lease-timeout"},
	{"Outbox.Topics", "-outbox-topics"},
	{"Outbox.Prefix", "-outbox-prefix"},
	{"Outbox.MaxBytes", "-outbox-max-bytes"},
	{"EventRouter.Tables", "-event-router-tables"},
	{"EventRouter.Properties", "-event-router"},
	{"EventRouter", "-event-router-tables"},
	{"Snapshot", "-snapshot"},
	// kafkasinkavro.Config and jsonschema.Config
	{"Subjects", "-schema-registry-subjects"},
	{"Namespace", "-schema-registry-namespace"},
}

// libraryPhrases are advice in the library's errors that the program
// cannot follow, and what to say instead; applied before libraryNames.
var libraryPhrases = []struct{ phrase, program string }{
	// The program has no setting for it: PLAIN needs TLS here.
	{", or SASL.AllowPlaintext if the network is trusted", ""},
	{"set Config.TLS", "set -tls-ca (or another -tls-* flag)"},
	{" (default os.TempDir())", ""},
	{"Run's ", ""},
	{" (the program's -lease-timeout)", ""},
	{"(kafkasink.DebeziumEncoder.Name; -slot)", "(-slot)"},
	{"does not apply to NewDebezium", "does not apply to -encoder debezium-avro"},
	{"<Name>", "<-slot>"},
	{", as Debezium requires", ""},
	{"(Config.SchemaIncludeList, TableIncludeList, ...)", "(-schema.include.list, -table.include.list, ...)"},
	{"Encoder: DebeziumEncoder.", "DebeziumEncoder."},
	// The interface behind an Encoder's option, before the option.
	{"Framer.FrameTopic: ", ""},
	{"set AnnotationsIn to AnnotateHeaders", "set -annotations-in headers"},
	{" (it is no kafkasink.Annotator)", ""},
	{"TLS CA (", "-tls-ca ("},
	{"TLS client certificate (", "-tls-cert and -tls-key ("},
	{"TLS client certificate:", "-tls-cert and -tls-key:"},
}

// libraryQualifiers are the qualifiers of the library's names, dropped
// before libraryNames applies.
var libraryQualifiers = []string{"kafkasink.Config.", "pgcdc.Config.", "pgcdc.LeaseConfig.", "LeaseConfig.",
	"kafkasinkavro.Config.", "jsonschema.Config.", "Config.", "kafkasink.DebeziumEncoder.", "debezium.Encoder.", "DebeziumEncoder."}

// speakFlags rewrites a problem of the library's in the program's terms.
func speakFlags(problem string) string {
	problem = strings.TrimPrefix(problem, "pgcdc: ")
	for _, p := range libraryPhrases {
		problem = strings.ReplaceAll(problem, p.phrase, p.program)
	}
	// The Encoder's Go type, which the program's -encoder names.
	problem = encoderType.ReplaceAllString(problem, "")
	for _, q := range libraryQualifiers {
		problem = strings.ReplaceAll(problem, q, "")
	}
	for _, n := range libraryNames {
		problem = replaceName(problem, n.name, n.program)
	}
	// The library names some flags itself, after its field: say it once.
	// The library names some flags (or the Debezium properties they
	// are named after) itself, after its field: say it once.
	return flagTwice.ReplaceAllStringFunc(problem, func(m string) string {
		first, second, _ := strings.Cut(m, " (")
		if first == "-"+strings.TrimPrefix(strings.TrimSuffix(second, ")"), "-") {
			return first
		}
		return m
	})
}

// flagTwice is a flag followed by a flag or a name in parentheses: the
// same one when the library named it after its field.
var flagTwice = regexp.MustCompile(`-[a-z][a-z0-9.-]* \(-?[a-z][a-z0-9.-]*\)`)

// encoderType is an Encoder's Go type in parentheses, as %T prints it.
var encoderType = regexp.MustCompile(` \(\*?[a-z][a-z0-9]*\.[A-Z][A-Za-z]*\)`)

// replaceName replaces the whole-word occurrences of name in s: not
// inside a longer name (such as Slot in SlotGap, or Prefix in
// Topics.Prefix), nor inside a quoted value (such as "My-Slot").
func replaceName(s, name, with string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\\' && quoted && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i += 2
			continue
		case s[i] == '"':
			quoted = !quoted
		case !quoted && strings.HasPrefix(s[i:], name):
			end := i + len(name)
			if (i == 0 || !nameByte(s[i-1]) && s[i-1] != '.') && (end == len(s) || !nameByte(s[end])) {
				b.WriteString(with)
				i = end
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func nameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// libraryProblems are the problems of err, a library's validation, in the
// program's terms: a *kafkasink.ConfigError's each, else err's text.
func libraryProblems(err error) []string {
	if err == nil {
		return nil
	}
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		return []string{speakFlags(err.Error())}
	}
	out := make([]string, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = speakFlags(p)
	}
	return out
}

// flagSettings are the program's flags' settings, for naming them in
// problems and suggesting them.
var flagSettings = func() map[string]setting {
	_, settings := defineFlags(new(options))
	return settings
}()

// flagToken finds the flags a problem names: a dash and a name, at the
// start or after a space, quote or bracket.
var flagToken = regexp.MustCompile(`(?:^|[\s("'\[,;/])-([a-z][a-z0-9]*(?:[.-][a-z0-9]+)*)`)

// subject is the flag a problem is about: the first it names, or "" when
// that is not a flag (an unknown flag's problem).
func subject(problem string) string {
	m := flagToken.FindStringSubmatch(problem)
	if m == nil {
		return ""
	}
	if _, ok := flagSettings[m[1]]; !ok {
		return ""
	}
	return m[1]
}

// whereMark starts what where appends, so that a problem gets it once.
const whereMark = " [flag -"

// where says where the flag name is set besides the command line.
func where(name string) string {
	s := whereMark + name
	if name != "config" {
		s += ", YAML " + configKey(name)
	}
	return s + ", env " + flagSettings[name].env + "]"
}

// located is problem with where its subject flag is set, once.
func located(problem string) string {
	if strings.Contains(problem, whereMark) {
		return problem
	}
	if name := subject(problem); name != "" {
		return problem + where(name)
	}
	return problem
}

// configError is a *kafkasink.ConfigError of problems, each located, or
// nil for none.
func configError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &kafkasink.ConfigError{Problems: locate(problems)}
}

// locate is the problems, each located.
func locate(problems []string) []string {
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = located(p)
	}
	return out
}

// printProblems writes the configuration problems of err, one a line,
// to w, for a person to fix them all before starting again.
func printProblems(w io.Writer, err error) {
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		fmt.Fprintln(w, "kafkasink:", err)
		return
	}
	noun := "problems"
	if len(ce.Problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(w, "kafkasink: %d configuration %s; nothing was started (kafkasink -h lists the flags):\n", len(ce.Problems), noun)
	for _, p := range ce.Problems {
		fmt.Fprintln(w, "  "+p)
	}
}

// knownEnvironment are the program's environment variables that are not
// a flag's.
var knownEnvironment = []string{"KAFKASINK_SASL_PASSWORD"}

// testEnvironment is the prefix of the test suite's variables
// (docs/integration-tests.md), which a developer's shell exports: not
// the program's, and not a misspelling of them.
const testEnvironment = "KAFKASINK_TEST_"

// environmentProblems refuses each KAFKASINK_* variable that getenv has
// set but the program does not read, naming the closest one it does: a
// misspelt variable would otherwise be ignored without a word. The
// names are the process's; getenv says which are set, as parse reads
// them.
func environmentProblems(getenv func(string) string) []string {
	known := slices.Clone(knownEnvironment)
	for _, s := range flagSettings {
		known = append(known, s.env)
	}
	var problems []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KAFKASINK_") || strings.HasPrefix(name, testEnvironment) || slices.Contains(known, name) || getenv(name) == "" {
			continue
		}
		problems = append(problems, fmt.Sprintf("$%s is not a setting of kafkasink (did you mean $%s?): rename or unset it", name, closest(name, known)))
	}
	slices.Sort(problems)
	return problems
}

// flagSuggestion is " (did you mean -name?)" for the flag nearest to the
// unknown name, when it is near enough to be a misspelling of it.
func flagSuggestion(name string, settings map[string]setting) string {
	names := make([]string, 0, len(settings))
	for n := range settings {
		names = append(names, n)
	}
	if near := closest(name, names); editDistance(name, near) <= max(2, len(name)/3) {
		return " (did you mean -" + near + "?)"
	}
	return ""
}

// closest is the name of names nearest to s in edit distance.
func closest(s string, names []string) string {
	best, bestDist := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestDist < 0 || d < bestDist || d == bestDist && n < best {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
