package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Every property of a Debezium Server file is mapped to a flag, accepted
// with a warning saying why it has no effect, or refused by name with what
// to do instead: nothing is ignored silently. docs/debezium-server.md has
// the table.

// propertyRule is what the program does with one property.
type propertyRule struct {
	flag   string   // the flag it sets; "" for none
	values []string // the values it accepts, when it names some
	// value is the flag's value for the property's; nil: the same.
	value  func(string) (string, error)
	refuse string // why it is refused, and what to do instead
	note   string // accepted without effect: why (logged as a warning)
}

// sourceRules are the rules of the debezium.source.* properties, by name
// without the prefix.
var sourceRules = map[string]propertyRule{
	"connector.class":               {values: []string{"io.debezium.connector.postgresql.PostgresConnector"}},
	"plugin.name":                   {values: []string{"pgoutput"}},
	"slot.name":                     {flag: "slot"},
	"publication.name":              {flag: "publication"},
	"publication.autocreate.mode":   {value: publicationAutocreate},
	"topic.prefix":                  {flag: "topic-prefix"},
	"snapshot.mode":                 {flag: "snapshot", value: snapshotMode},
	"schema.include.list":           {flag: "schema.include.list"},
	"schema.exclude.list":           {flag: "schema.exclude.list"},
	"table.include.list":            {flag: "table.include.list"},
	"table.exclude.list":            {flag: "table.exclude.list"},
	"column.include.list":           {flag: "column.include.list"},
	"column.exclude.list":           {flag: "column.exclude.list"},
	"decimal.handling.mode":         {flag: "decimal.handling.mode", values: []string{"precise", "double", "string"}},
	"time.precision.mode":           {flag: "time.precision.mode", values: []string{"adaptive", "adaptive_time_microseconds", "connect", "isostring"}},
	"interval.handling.mode":        {flag: "interval.handling.mode", values: []string{"numeric", "string"}},
	"binary.handling.mode":          {flag: "binary.handling.mode", values: []string{"bytes", "base64", "base64-url-safe", "hex"}},
	"hstore.handling.mode":          {values: []string{"json"}},
	"tombstones.on.delete":          {flag: "tombstones.on.delete", values: []string{"true", "false"}},
	"skipped.operations":            {flag: "skipped.operations"},
	"provide.transaction.metadata":  {flag: "provide.transaction.metadata", values: []string{"true", "false"}},
	"unavailable.value.placeholder": {flag: "unavailable.value.placeholder"},
	"extended.headers.enabled":      {flag: "extended.headers.enabled", values: []string{"true", "false"}},
	"config.providers":              {value: configProviders},
	"config.providers.file.class":   {values: []string{"org.apache.kafka.common.config.provider.FileConfigProvider"}},
	"config.providers.dir.class":    {values: []string{"org.apache.kafka.common.config.provider.DirectoryConfigProvider"}},
	"config.providers.env.class":    {values: []string{"org.apache.kafka.common.config.provider.EnvVarConfigProvider"}},
	"offset.storage":                {note: "kafkasink keeps its position in the checkpoint topic (-checkpoint-topic), in the same Kafka transaction as the records"},
	"offset.storage.file.filename":  {note: "kafkasink keeps its position in the checkpoint topic (-checkpoint-topic), in the same Kafka transaction as the records"},
	"offset.flush.interval.ms":      {note: "kafkasink writes its position with every batch, in the same Kafka transaction as the records"},
	"database.server.name":          {refuse: "Debezium 2.0 replaced it with topic.prefix: rename it"},
	"message.key.columns":           {refuse: "give the key columns with -key-columns (schema.table=col1,col2;...)"},
	"slot.drop.on.stop":             {refuse: "kafkasink never drops its slot on stop (it would lose the changes made while it is stopped); remove it, and drop a slot no longer used with pg_drop_replication_slot"},
}

// formatRules are the rules of the debezium.format.* properties.
var formatRules = map[string]propertyRule{
	"debezium.format.key":                  {values: []string{"json"}},
	"debezium.format.value":                {values: []string{"json"}},
	"debezium.format.header":               {values: []string{"json"}},
	"debezium.format.schemas.enable":       {flag: "schemas.enable", values: []string{"true", "false"}},
	"debezium.format.key.schemas.enable":   {flag: "schemas.enable", values: []string{"true", "false"}},
	"debezium.format.value.schemas.enable": {flag: "schemas.enable", values: []string{"true", "false"}},
}

// producerRules are the rules of the debezium.sink.kafka.producer.*
// properties, by Kafka producer property.
var producerRules = map[string]propertyRule{
	"bootstrap.servers":  {flag: "brokers"},
	"key.serializer":     {values: []string{"org.apache.kafka.common.serialization.StringSerializer"}},
	"value.serializer":   {values: []string{"org.apache.kafka.common.serialization.StringSerializer"}},
	"compression.type":   {flag: "compression", values: []string{"none", "gzip", "snappy", "lz4", "zstd"}},
	"security.protocol":  {refuse: "TLS is on when any -tls-* flag is set (-tls-ca, -tls-cert, -tls-key), SASL with -sasl-mechanism: use those"},
	"sasl.mechanism":     {refuse: "use -sasl-mechanism, -sasl-user and -sasl-password-file"},
	"sasl.jaas.config":   {refuse: "use -sasl-mechanism, -sasl-user and -sasl-password-file"},
	"acks":               {refuse: "kafkasink writes with acks=all, which its guarantees need: remove it"},
	"enable.idempotence": {refuse: "kafkasink's -mode decides it (exactly-once and idempotent are idempotent): remove it"},
	"transactional.id":   {refuse: "kafkasink derives it from -sink-id: remove it"},
}

// debeziumDefaults are the settings a Debezium Server file gives when it
// does not say otherwise: Debezium's defaults where they differ from the
// program's, and the program's form of Debezium Server's records (the
// Debezium envelope, its key with JsonConverter's schemas.enable, no
// kafkasink headers).
var debeziumServerDefaults = map[string]string{
	"encoder":        "debezium",
	"key-format":     "json",
	"headers":        "none",
	"schemas.enable": "true",
	"snapshot":       "true",
	"keyless-tables": "true",
	"slot":           "debezium",
	"publication":    "dbz_publication",
}

// debeziumSettings are what a Debezium Server file gives: flag values,
// each with the property it came from, the PostgreSQL password, Debezium's
// source name (its topic.prefix), and warnings to log.
type debeziumSettings struct {
	path       string
	flags      map[string]property // by flag name
	pgPassword string
	sourceName string
	warnings   []string
}

// loadDebeziumConfig reads the Debezium Server file at path and maps its
// properties. Every problem names the file, the line and the property.
func loadDebeziumConfig(path string, getenv func(string) string) (*debeziumSettings, []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("-debezium-config: %v", err)}
	}
	props, problems := parseProperties(string(b))
	for i := range problems {
		problems[i] = path + ":" + strings.TrimPrefix(problems[i], "line ")
	}
	s := &debeziumSettings{path: path, flags: make(map[string]property)}
	conn := make(map[string]property)
	for _, p := range props {
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: ", path, p.line, p.key)+fmt.Sprintf(format, args...))
		}
		p.fromEnv = strings.Contains(p.value, "${")
		v, err := expandProperty(p.value, getenv)
		if err != nil {
			bad("%v", err)
			continue
		}
		p.value = v
		if name, ok := strings.CutPrefix(p.key, "debezium.source.database."); ok && slices.Contains(connProperties, name) {
			conn[name] = p
			continue
		}
		rule, known := ruleOf(p.key)
		if !known {
			bad("kafkasink does not map this property: remove it (docs/debezium-server.md lists the properties it maps)")
			continue
		}
		if problem := s.apply(p, rule); problem != "" {
			bad("%s", problem)
		}
	}
	problems = append(problems, s.connect(conn)...)
	if _, ok := s.flags["topic-prefix"]; !ok {
		problems = append(problems, path+": debezium.source.topic.prefix is not set, and Debezium requires it: set it to the topics' prefix (<prefix>.<schema>.<table>)")
	}
	if p, ok := s.flags["topic-prefix"]; ok {
		s.sourceName = p.value
	}
	return s, problems
}

// ruleOf is the rule of the property key, and whether there is one.
func ruleOf(key string) (propertyRule, bool) {
	switch {
	case key == "debezium.sink.type":
		return propertyRule{values: []string{"kafka"}}, true
	case strings.HasPrefix(key, "debezium.source."):
		r, ok := sourceRules[strings.TrimPrefix(key, "debezium.source.")]
		return r, ok
	case strings.HasPrefix(key, "debezium.sink.kafka.producer."):
		if r, ok := producerRules[strings.TrimPrefix(key, "debezium.sink.kafka.producer.")]; ok {
			return r, true
		}
		return propertyRule{refuse: "kafkasink configures its own producer and passes no producer property through: remove it"}, true
	case strings.HasPrefix(key, "debezium.format."):
		if r, ok := formatRules[key]; ok {
			return r, true
		}
		return propertyRule{refuse: "kafkasink writes JSON as JsonConverter does and takes no other converter setting than schemas.enable: remove it"}, true
	case strings.HasPrefix(key, "debezium.transforms") || strings.HasPrefix(key, "debezium.predicates"):
		return propertyRule{refuse: "kafkasink applies no single message transforms: remove it (its topic-routes and topic-template flags route topics)"}, true
	case strings.HasPrefix(key, "debezium.sink."):
		return propertyRule{refuse: "kafkasink writes to Kafka only: set debezium.sink.type=kafka and give the brokers in debezium.sink.kafka.producer.bootstrap.servers"}, true
	}
	return propertyRule{}, false
}

// apply records what property p sets by rule, or returns its problem.
func (s *debeziumSettings) apply(p property, rule propertyRule) string {
	switch {
	case rule.refuse != "":
		return "not supported: " + rule.refuse
	case rule.values != nil && !slices.Contains(rule.values, p.value):
		return fmt.Sprintf("%q is not supported: want %s", p.value, strings.Join(rule.values, " or "))
	case rule.note != "":
		s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: %s has no effect: %s", s.path, p.line, p.key, rule.note))
		return ""
	}
	if rule.value != nil {
		v, err := rule.value(p.value)
		if err != nil {
			return err.Error()
		}
		p.value = v
	}
	if rule.flag == "" {
		return ""
	}
	if prev, ok := s.flags[rule.flag]; ok && prev.value != p.value {
		return fmt.Sprintf("%q disagrees with %s=%q at line %d: give them the same value", p.value, prev.key, prev.value, prev.line)
	}
	s.flags[rule.flag] = p
	return ""
}

// snapshotMode is -snapshot for a snapshot.mode.
func snapshotMode(mode string) (string, error) {
	switch mode {
	case "initial":
		return "true", nil
	case "no_data", "never":
		return "false", nil
	case "when_needed":
		return "", fmt.Errorf("%q is not supported: kafkasink snapshots once, when it creates the slot (initial); for a slot that cannot continue, -slot-gap resnapshot reads the tables again", mode)
	case "always", "initial_only", "configuration_based", "custom", "recovery":
		return "", fmt.Errorf("%q is not supported: kafkasink supports initial (snapshot, then stream) and no_data (stream only); "+
			"to read the tables again, kafkasink offsets reset -to resnapshot, or ask a backfill (kafkasink backfill)", mode)
	}
	return "", fmt.Errorf("%q is not a Debezium snapshot.mode: want initial or no_data", mode)
}

// publicationAutocreate checks publication.autocreate.mode: the program
// creates a publication as all_tables does, FOR ALL TABLES unless -tables.
func publicationAutocreate(mode string) (string, error) {
	switch mode {
	case "all_tables":
		return mode, nil
	case "filtered":
		return "", fmt.Errorf("%q is not supported: give the tables of the publication with -tables (the include and exclude lists filter what is delivered, not the publication)", mode)
	case "disabled":
		return "", fmt.Errorf("%q is not supported: -create=false makes the program use an existing publication (and slot) only", mode)
	}
	return "", fmt.Errorf("%q is not a Debezium publication.autocreate.mode: want all_tables", mode)
}

// configProviders checks config.providers: the program resolves the
// expressions of Kafka's file, dir and env providers itself (see
// providedValue), and knows no other.
func configProviders(list string) (string, error) {
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); !slices.Contains([]string{"file", "dir", "env"}, name) {
			return "", fmt.Errorf("the config provider %q is not supported: kafkasink resolves ${file:PATH:KEY}, ${dir:DIR:NAME} and ${env:NAME} itself; remove it", name)
		}
	}
	return list, nil
}

// connProperties are the debezium.source.database.* properties that make
// up -pg, without the prefix.
var connProperties = []string{"hostname", "port", "user", "password", "dbname", "sslmode"}

// connect makes -pg of the connection properties, and keeps the password
// apart (never in -pg, which logs and the process list may show).
func (s *debeziumSettings) connect(conn map[string]property) []string {
	var problems []string
	for _, name := range []string{"hostname", "user", "dbname"} {
		if _, ok := conn[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s: debezium.source.database.%s is not set, and Debezium requires it: set it", s.path, name))
		}
	}
	if problems != nil {
		return problems
	}
	port := "5432"
	if p, ok := conn["port"]; ok {
		port = p.value
	}
	u := url.URL{Scheme: "postgres", User: url.User(conn["user"].value), Host: net.JoinHostPort(conn["hostname"].value, port), Path: "/" + conn["dbname"].value}
	if p, ok := conn["sslmode"]; ok {
		u.RawQuery = url.Values{"sslmode": {p.value}}.Encode()
	}
	s.flags["pg"] = property{key: "debezium.source.database.hostname, port, user, dbname", value: u.String(), line: conn["hostname"].line}
	if p, ok := conn["password"]; ok {
		s.pgPassword = p.value
		if !p.fromEnv {
			s.warnings = append(s.warnings, fmt.Sprintf("%s:%d: debezium.source.database.password holds the password in the file: "+
				"write it as ${PGPASSWORD} (an environment variable), or leave it out and use -pg-password-file", s.path, p.line))
		}
	}
	return nil
}

// useDebeziumConfig reads -debezium-config and sets, through set, each
// flag it gives that is not set otherwise (isSet), its defaults
// included. It returns the file's problems.
func (o *options) useDebeziumConfig(getenv func(string) string, isSet func(string) bool, set func(name, value, from string)) []string {
	s, problems := loadDebeziumConfig(o.debeziumConfig, getenv)
	if s == nil {
		return problems
	}
	for name, value := range debeziumServerDefaults {
		if _, given := s.flags[name]; !given && !isSet(name) {
			set(name, value, fmt.Sprintf("%s: Debezium's default for %s", o.debeziumConfig, name))
		}
	}
	o.debeziumOrigins = make(map[string]string)
	for name, p := range s.flags {
		if !isSet(name) {
			origin := fmt.Sprintf("%s:%d: %s", o.debeziumConfig, p.line, p.key)
			set(name, p.value, origin)
			o.debeziumOrigins[name] = origin
		}
	}
	o.pgPassword, o.debeziumName, o.debeziumWarnings = s.pgPassword, s.sourceName, s.warnings
	return problems
}

// blameDebeziumConfig adds to each problem about a flag that the
// Debezium Server file set the property that set it, so that the fix is
// made where the value is.
func (o *options) blameDebeziumConfig(problems []string) []string {
	if len(o.debeziumOrigins) == 0 {
		return problems
	}
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = p
		if origin, ok := o.debeziumOrigins[subject(p)]; ok {
			out[i] = p + " (set by " + origin + ")"
		}
	}
	return out
}
