// Command kafkasink streams PostgreSQL logical replication into Kafka with
// pgcdc.Run and a kafkasink sink, exactly once by default, and logs its
// progress: events per second, and how far behind the database it is in
// bytes of WAL and in seconds.
//
//	go -C cmd/kafkasink run . \
//	    -pg 'postgres://cdc:secret@db:5432/shop' -brokers kafka:9092 \
//	    -tables public.orders,public.customers -slot shop -publication shop
//
// Every flag falls back to an environment variable, named in -h
// (KAFKASINK_PG, KAFKASINK_BROKERS, ...), so the program fits a container.
// The SASL password is read from KAFKASINK_SASL_PASSWORD only: a flag would
// show it in the process list.
//
// SIGINT and SIGTERM stop it cleanly: the Write in progress commits or
// aborts as a whole, the sink is closed, and the exit status is 0. A run
// killed at any moment (SIGKILL) loses and duplicates nothing for
// read_committed consumers: the next run resumes from the slot and the
// sink's checkpoint.
//
// It fails closed at the source: a checkpoint written for another server,
// database or slot stops it, and so does a slot that cannot continue from
// the checkpoint (dropped, invalidated by max_slot_wal_keep_size, or moved
// by someone else), unless -slot-gap says to read the tables again
// (resnapshot) or to go on across the gap (accept); either is logged and
// recorded in the checkpoint.
//
// Exit status: 0 after a signal, 1 on a runtime error, 2 on a
// configuration error, 3 when another instance with the same sink id
// fenced this one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// options are the program's settings after flags and environment.
type options struct {
	pg, brokers, tables, slot, publication, sinkID string
	keyColumns                                     string
	create, snapshot, acceptPublicationTables      bool
	keylessTables                                  bool
	slotGap                                        pgcdc.SlotGap
	retainedWALWarn, spoolMaxBytes                 int64
	mode, prefix, template, encoder, keyFormat     string
	topicRoutes                                    string
	checkpointTopic, deadLetter                    string
	partitions, replicationFactor                  int
	tlsCA, tlsCert, tlsKey, tlsServerName          string
	saslMechanism, saslUser                        string
	saslPassword                                   string
	batchEvents, batchBytes                        int
	batchWait, txnTimeout, progress                time.Duration
	logLevel, logFormat                            string
	debezium                                       debeziumOptions
}

// debeziumOptions are the flags of kafkasink.DebeziumEncoder's options,
// each named after the Debezium connector property it mirrors (or, for
// the options Debezium lacks, prefixed debezium-).
type debeziumOptions struct {
	decimalHandling, timePrecision, intervalHandling, binaryHandling string
	tombstonesOnDelete, extendedHeaders                              bool
	skippedOperations, unavailablePlaceholder                        string
	lsnAsString, nullNestedArrays                                    bool
	runID                                                            string
}

// debeziumDefaults are the flags' defaults: Debezium's.
var debeziumDefaults = debeziumOptions{
	decimalHandling: "precise", timePrecision: "adaptive", intervalHandling: "numeric", binaryHandling: "bytes",
	tombstonesOnDelete: true, extendedHeaders: true,
}

// parse reads args, with getenv supplying defaults: a flag given on the
// command line wins over its environment variable.
func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("kafkasink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var envErrs []string
	str := func(p *string, name, env, def, usage string) {
		if v := getenv(env); v != "" {
			def = v
		}
		fs.StringVar(p, name, def, usage+" ($"+env+")")
	}
	num := func(p *int, name, env string, def int, usage string) {
		if v := getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Sprintf("$%s=%q is not an integer", env, v))
			}
			def = n
		}
		fs.IntVar(p, name, def, usage+" ($"+env+")")
	}
	dur := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		if v := getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Sprintf("$%s=%q is not a duration such as 250ms", env, v))
			}
			def = d
		}
		fs.DurationVar(p, name, def, usage+" ($"+env+")")
	}
	boolean := func(p *bool, name, env string, def bool, usage string) {
		if v := getenv(env); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				envErrs = append(envErrs, fmt.Sprintf("$%s=%q is not a boolean", env, v))
			}
			def = b
		}
		fs.BoolVar(p, name, def, usage+" ($"+env+")")
	}

	str(&o.pg, "pg", "KAFKASINK_PG", "", "PostgreSQL connection string (postgres:// URL or keyword/value); the role needs REPLICATION")
	str(&o.brokers, "brokers", "KAFKASINK_BROKERS", "", "Kafka seed brokers, comma-separated host:port")
	str(&o.tables, "tables", "KAFKASINK_TABLES", "", `tables of the publication to create (an existing publication must have these tables, see -accept-publication-tables), comma-separated schema.table, names as stored; quote a name with a dot, comma or double quote as in SQL: public."a.b"; empty means FOR ALL TABLES`)
	str(&o.slot, "slot", "KAFKASINK_SLOT", "kafkasink", "logical replication slot")
	str(&o.publication, "publication", "KAFKASINK_PUBLICATION", "kafkasink", "publication")
	str(&o.keyColumns, "key-columns", "KAFKASINK_KEY_COLUMNS", "", "key columns of tables, as schema.table=col1,col2 separated by ';' (default: the replica identity, else the primary key)")
	boolean(&o.keylessTables, "keyless-tables", "KAFKASINK_KEYLESS_TABLES", false, "write the changes of tables without a primary key or replica identity index with a null key, "+
		"in partition 0, as Debezium does, and read them in the snapshot (which then cannot resume inside such a table); "+
		"default: keyed by event id, and the snapshot refuses them")
	boolean(&o.create, "create", "KAFKASINK_CREATE", true, "create the slot and the publication when missing")
	boolean(&o.acceptPublicationTables, "accept-publication-tables", "KAFKASINK_ACCEPT_PUBLICATION_TABLES", false,
		"stream an existing publication whose tables differ from -tables as it is, with a warning (default: refuse to start, naming the tables)")
	boolean(&o.snapshot, "snapshot", "KAFKASINK_SNAPSHOT", false, "deliver the tables' existing rows before the changes")
	var slotGap string
	str(&slotGap, "slot-gap", "KAFKASINK_SLOT_GAP", "refuse", "when the slot cannot continue from the checkpoint (dropped, invalidated, moved by someone else): "+
		"refuse, resnapshot (read the tables again from the new slot) or accept (stream on, the gap recorded in the checkpoint)")
	var retainedWarn int
	num(&retainedWarn, "retained-wal-warn", "KAFKASINK_RETAINED_WAL_WARN", 0, "warn when the slot retains more WAL than this many bytes (0: 1 GiB; negative: never)")
	var spoolMax int
	num(&spoolMax, "spool-max-bytes", "KAFKASINK_SPOOL_MAX_BYTES", 0, "bound on the bytes spooled to disk for streamed transactions not yet committed; a larger transaction stops the program (0: 16 GiB; negative: no bound)")
	str(&o.sinkID, "sink-id", "KAFKASINK_SINK_ID", "", "sink id: checkpoint key and base of the transactional id; default the slot name")
	str(&o.mode, "mode", "KAFKASINK_MODE", "exactly-once", "exactly-once, idempotent or plain")
	str(&o.prefix, "topic-prefix", "KAFKASINK_TOPIC_PREFIX", "", "topics are <prefix>.<schema>.<table> (default prefix kafkasink)")
	str(&o.topicRoutes, "topic-routes", "KAFKASINK_TOPIC_ROUTES", "", `explicit topics, comma-separated schema.table=topic (names quoted as in -tables); they win over -topic-prefix and -topic-template, and tables listed with the same topic share it`)
	str(&o.template, "topic-template", "KAFKASINK_TOPIC_TEMPLATE", "", "topic template with {schema} and {table}; conflicts with -topic-prefix")
	num(&o.partitions, "partitions", "KAFKASINK_PARTITIONS", 0, "partitions of topics the sink creates (0: the broker's default)")
	num(&o.replicationFactor, "replication-factor", "KAFKASINK_REPLICATION_FACTOR", 0, "replication factor of topics the sink creates (0: the broker's default)")
	str(&o.encoder, "encoder", "KAFKASINK_ENCODER", "json", "record value: json (change event), upsert (row, tombstone on delete) or debezium")
	d, def := &o.debezium, debeziumDefaults
	str(&d.decimalHandling, "decimal.handling.mode", "KAFKASINK_DECIMAL_HANDLING_MODE", def.decimalHandling, "-encoder debezium: numeric and money as precise (Connect Decimal), double or string")
	str(&d.timePrecision, "time.precision.mode", "KAFKASINK_TIME_PRECISION_MODE", def.timePrecision, "-encoder debezium: dates and times as adaptive, adaptive_time_microseconds, connect or isostring")
	str(&d.intervalHandling, "interval.handling.mode", "KAFKASINK_INTERVAL_HANDLING_MODE", def.intervalHandling, "-encoder debezium: intervals as numeric (microseconds) or string (ISO 8601)")
	str(&d.binaryHandling, "binary.handling.mode", "KAFKASINK_BINARY_HANDLING_MODE", def.binaryHandling, "-encoder debezium: bytea as bytes, base64, base64-url-safe or hex")
	boolean(&d.tombstonesOnDelete, "tombstones.on.delete", "KAFKASINK_TOMBSTONES_ON_DELETE", def.tombstonesOnDelete, "-encoder debezium: follow each delete with a tombstone")
	str(&d.skippedOperations, "skipped.operations", "KAFKASINK_SKIPPED_OPERATIONS", def.skippedOperations, `-encoder debezium: operations not written, comma-separated c, u, d, t, or none (default t)`)
	str(&d.unavailablePlaceholder, "unavailable.value.placeholder", "KAFKASINK_UNAVAILABLE_VALUE_PLACEHOLDER", def.unavailablePlaceholder, "-encoder debezium: value of an unchanged TOAST column (default __debezium_unavailable_value)")
	boolean(&d.extendedHeaders, "extended.headers.enabled", "KAFKASINK_EXTENDED_HEADERS_ENABLED", def.extendedHeaders, "-encoder debezium: add the __debezium.context.* headers")
	boolean(&d.lsnAsString, "debezium-lsn-as-string", "KAFKASINK_DEBEZIUM_LSN_AS_STRING", def.lsnAsString, "-encoder debezium: write source.lsn as a string (not a Debezium property), for readers that round numbers above 2^53")
	boolean(&d.nullNestedArrays, "debezium-null-nested-arrays", "KAFKASINK_DEBEZIUM_NULL_NESTED_ARRAYS", def.nullNestedArrays, "-encoder debezium: write the inner arrays of a multi-dimensional array as null, as Debezium does (not a Debezium property)")
	str(&d.runID, "debezium-run-id", "KAFKASINK_DEBEZIUM_RUN_ID", def.runID, "-encoder debezium: the __debezium.context.runId header (default: new for every run, as Debezium's)")
	str(&o.keyFormat, "key-format", "KAFKASINK_KEY_FORMAT", "text", "record key: text or json")
	str(&o.checkpointTopic, "checkpoint-topic", "KAFKASINK_CHECKPOINT_TOPIC", "", "checkpoint topic (default "+kafkasink.DefaultCheckpointTopic+")")
	str(&o.deadLetter, "dead-letter-topic", "KAFKASINK_DEAD_LETTER_TOPIC", "", "topic for events that cannot be delivered (unroutable, unencodable, no key, too large), with headers naming the reason; empty stops the program on such an event instead")
	str(&o.tlsCA, "tls-ca", "KAFKASINK_TLS_CA", "", "PEM file of the CAs to trust; setting any -tls-* flag enables TLS")
	str(&o.tlsCert, "tls-cert", "KAFKASINK_TLS_CERT", "", "client certificate PEM file, for mutual TLS")
	str(&o.tlsKey, "tls-key", "KAFKASINK_TLS_KEY", "", "client key PEM file, for mutual TLS")
	str(&o.tlsServerName, "tls-server-name", "KAFKASINK_TLS_SERVER_NAME", "", "name to verify in the broker's certificate")
	str(&o.saslMechanism, "sasl-mechanism", "KAFKASINK_SASL_MECHANISM", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the password comes from $KAFKASINK_SASL_PASSWORD")
	str(&o.saslUser, "sasl-user", "KAFKASINK_SASL_USER", "", "SASL user name")
	num(&o.batchEvents, "batch-max-events", "KAFKASINK_BATCH_MAX_EVENTS", 0, "events per Write (0: pgcdc's default)")
	num(&o.batchBytes, "batch-max-bytes", "KAFKASINK_BATCH_MAX_BYTES", 0, "estimated bytes per Write (0: pgcdc's default)")
	dur(&o.batchWait, "batch-max-wait", "KAFKASINK_BATCH_MAX_WAIT", 0, "how long a batch waits for more transactions (0: none, written as soon as the previous Write returns)")
	dur(&o.txnTimeout, "transaction-timeout", "KAFKASINK_TRANSACTION_TIMEOUT", 0, "Kafka transaction timeout (0: the sink's default)")
	dur(&o.progress, "progress", "KAFKASINK_PROGRESS", 5*time.Second, "how often to log progress; 0 disables")
	str(&o.logLevel, "log-level", "KAFKASINK_LOG_LEVEL", "info", "debug, info, warn or error")
	str(&o.logFormat, "log-format", "KAFKASINK_LOG_FORMAT", "auto", "json, text, or auto: text on a terminal, JSON otherwise (for a log collector)")
	o.saslPassword = getenv("KAFKASINK_SASL_PASSWORD")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.slotGap.UnmarshalText([]byte(slotGap)); err != nil {
		envErrs = append(envErrs, "-slot-gap: "+err.Error())
	}
	o.retainedWALWarn = int64(retainedWarn)
	o.spoolMaxBytes = int64(spoolMax)
	if fs.NArg() > 0 {
		envErrs = append(envErrs, fmt.Sprintf("unexpected arguments %q: every setting is a flag", fs.Args()))
	}
	if envErrs != nil {
		return nil, errors.New(strings.Join(envErrs, "; "))
	}
	return o, nil
}

// configs turns options into the sink's and pgcdc's Configs. Problems of
// the values themselves are left to kafkasink.New and pgcdc.Run, which
// report them all at once.
func (o *options) configs(logger *slog.Logger) (kafkasink.Config, pgcdc.Config, error) {
	var problems []string
	mode, err := kafkasink.ParseMode(o.mode)
	if err != nil {
		problems = append(problems, err.Error())
	}
	var enc kafkasink.Encoder
	switch o.encoder {
	case "json":
		enc = kafkasink.JSONEncoder{}
	case "upsert":
		enc = kafkasink.UpsertEncoder{}
	case "debezium":
		dbz, dbzProblems := o.debezium.encoder()
		dbz.Name = o.slot
		enc, problems = dbz, append(problems, dbzProblems...)
	default:
		problems = append(problems, fmt.Sprintf("-encoder %q: want json, upsert or debezium", o.encoder))
	}
	if o.encoder != "debezium" && o.debezium != debeziumDefaults {
		problems = append(problems, fmt.Sprintf("the Debezium encoder's flags (%s) apply to -encoder debezium only, not %q", strings.Join(o.debezium.changed(), ", "), o.encoder))
	}
	var kf kafkasink.KeyFormat
	switch o.keyFormat {
	case "text":
		kf = kafkasink.KeyText
	case "json":
		kf = kafkasink.KeyJSON
	default:
		problems = append(problems, fmt.Sprintf("-key-format %q: want text or json", o.keyFormat))
	}
	routes := make(map[string]string)
	for _, r := range splitNames(o.topicRoutes) {
		i := strings.LastIndexByte(r, '=')
		if i < 0 {
			problems = append(problems, fmt.Sprintf("-topic-routes entry %q: want schema.table=topic", r))
			continue
		}
		routes[strings.TrimSpace(r[:i])] = strings.TrimSpace(r[i+1:])
	}
	if o.pg == "" {
		problems = append(problems, "-pg (or $KAFKASINK_PG) is required: a PostgreSQL connection string")
	}
	if o.brokers == "" {
		problems = append(problems, "-brokers (or $KAFKASINK_BROKERS) is required")
	}
	keyColumns, err := parseKeyColumns(o.keyColumns)
	if err != nil {
		problems = append(problems, err.Error())
	}
	sinkID := o.sinkID
	if sinkID == "" {
		sinkID = o.slot
	}
	kcfg := kafkasink.Config{
		Brokers:            splitList(o.brokers),
		SinkID:             sinkID,
		Mode:               mode,
		TransactionTimeout: o.txnTimeout,
		CheckpointTopic:    o.checkpointTopic,
		Topics: kafkasink.Topics{
			Prefix: o.prefix, Template: o.template, Routes: routes,
			Partitions: int32(o.partitions), ReplicationFactor: int16(o.replicationFactor),
		},
		KeyFormat:       kf,
		Encoder:         enc,
		DeadLetterTopic: o.deadLetter,
		Logger:          logger,
	}
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" || o.tlsServerName != "" {
		kcfg.TLS = &kafkasink.TLS{CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey, ServerName: o.tlsServerName}
	}
	if o.saslMechanism != "" {
		kcfg.SASL = &kafkasink.SASL{
			Mechanism: kafkasink.SASLMechanism(strings.ToUpper(o.saslMechanism)),
			Username:  o.saslUser,
			Password:  kafkasink.Secret(o.saslPassword),
		}
	}
	pcfg := pgcdc.Config{
		ConnString:              o.pg,
		Slot:                    o.slot,
		Publication:             o.publication,
		Tables:                  splitNames(o.tables),
		CreateSlot:              o.create,
		CreatePublication:       o.create,
		Snapshot:                o.snapshot,
		AcceptPublicationTables: o.acceptPublicationTables,
		KeylessTables:           o.keylessTables,
		SlotGap:                 o.slotGap,
		RetainedWALWarn:         o.retainedWALWarn,
		SpoolMaxBytes:           o.spoolMaxBytes,
		BatchMaxEvents:          o.batchEvents,
		BatchMaxBytes:           o.batchBytes,
		BatchMaxWait:            o.batchWait,
		Logger:                  logger,
	}
	pcfg.KeyColumns = keyColumns
	if problems != nil {
		return kcfg, pcfg, &kafkasink.ConfigError{Problems: problems}
	}
	return kcfg, pcfg, nil
}

// encoder returns the DebeziumEncoder the options describe, and a
// problem for each mode flag whose value is not one of Debezium's. The
// other values are checked by kafkasink.New.
func (d debeziumOptions) encoder() (kafkasink.DebeziumEncoder, []string) {
	var problems []string
	mode := func(flag, value, want string, ok bool) {
		if !ok {
			problems = append(problems, fmt.Sprintf("-%s %q: want %s", flag, value, want))
		}
	}
	enc := kafkasink.DebeziumEncoder{
		DisableTombstones:           !d.tombstonesOnDelete,
		SkippedOperations:           d.skippedOperations,
		DisableExtendedHeaders:      !d.extendedHeaders,
		RunID:                       d.runID,
		LSNAsString:                 d.lsnAsString,
		UnavailableValuePlaceholder: d.unavailablePlaceholder,
		NullNestedArrays:            d.nullNestedArrays,
	}
	var ok bool
	enc.DecimalHandling, ok = kafkasink.ParseDecimalMode(d.decimalHandling)
	mode("decimal.handling.mode", d.decimalHandling, "precise, double or string", ok)
	enc.TimePrecision, ok = kafkasink.ParseTimePrecisionMode(d.timePrecision)
	mode("time.precision.mode", d.timePrecision, "adaptive, adaptive_time_microseconds, connect or isostring", ok)
	enc.IntervalHandling, ok = kafkasink.ParseIntervalMode(d.intervalHandling)
	mode("interval.handling.mode", d.intervalHandling, "numeric or string", ok)
	enc.BinaryHandling, ok = kafkasink.ParseBinaryMode(d.binaryHandling)
	mode("binary.handling.mode", d.binaryHandling, "bytes, base64, base64-url-safe or hex", ok)
	return enc, problems
}

// changed names the flags whose values differ from Debezium's defaults.
func (d debeziumOptions) changed() []string {
	def := debeziumDefaults
	var names []string
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"-decimal.handling.mode", d.decimalHandling != def.decimalHandling},
		{"-time.precision.mode", d.timePrecision != def.timePrecision},
		{"-interval.handling.mode", d.intervalHandling != def.intervalHandling},
		{"-binary.handling.mode", d.binaryHandling != def.binaryHandling},
		{"-tombstones.on.delete", d.tombstonesOnDelete != def.tombstonesOnDelete},
		{"-skipped.operations", d.skippedOperations != def.skippedOperations},
		{"-unavailable.value.placeholder", d.unavailablePlaceholder != def.unavailablePlaceholder},
		{"-extended.headers.enabled", d.extendedHeaders != def.extendedHeaders},
		{"-debezium-lsn-as-string", d.lsnAsString != def.lsnAsString},
		{"-debezium-null-nested-arrays", d.nullNestedArrays != def.nullNestedArrays},
		{"-debezium-run-id", d.runID != def.runID},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	return names
}

// parseKeyColumns parses -key-columns: "schema.table=col1,col2" per table,
// tables separated by ';'; a table without a schema is in public. Table
// names are quoted as in -tables (see kafkasink.TableKeys).
func parseKeyColumns(s string) (kafkasink.TableKeys, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := make(kafkasink.TableKeys)
	for _, part := range strings.Split(s, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		table, cols, ok := strings.Cut(part, "=")
		table = strings.TrimSpace(table)
		if !strings.Contains(table, ".") {
			table = "public." + table
		}
		names := splitList(cols)
		if !ok || table == "public." || len(names) == 0 {
			return nil, fmt.Errorf("-key-columns %q: want schema.table=col1,col2 for each table, separated by ';'", part)
		}
		if _, dup := out[table]; dup {
			return nil, fmt.Errorf("-key-columns names %s twice", table)
		}
		out[table] = names
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitNames splits a comma-separated list of table names, or of
// table=topic pairs, at the commas outside double quotes.
func splitNames(s string) []string {
	var (
		out    []string
		quoted bool
		start  int
	)
	add := func(p string) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted // a doubled quote toggles twice
		case ',':
			if !quoted {
				add(s[start:i])
				start = i + 1
			}
		}
	}
	add(s[start:])
	return out
}

// fieldFlags names the program's flag for each Config field that the
// library's errors name.
var fieldFlags = []struct{ field, flag string }{
	{"DeadLetterTopic", "-dead-letter-topic"},
	{"Topics.Routes", "-topic-routes"},
	{"Topics.Prefix", "-topic-prefix"},
	{"Topics.Template", "-topic-template"},
	{"Config.Tables", "-tables"},
	{"Config.AcceptPublicationTables", "-accept-publication-tables"},
	{"Config.SpoolMaxBytes", "-spool-max-bytes"},
}

// withFlagNames adds to err the program's flags for the Config fields it
// names, so that the advice in the library's errors can be followed here.
func withFlagNames(err error) error {
	if err == nil {
		return nil
	}
	var hints []string
	for _, f := range fieldFlags {
		if strings.Contains(err.Error(), f.field) {
			hints = append(hints, f.field+" is "+f.flag)
		}
	}
	if hints == nil {
		return err
	}
	return fmt.Errorf("%w [in this program: %s]", err, strings.Join(hints, "; "))
}

// run is the program; main only adds the signals and the exit.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kafkasink:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(stderr, "kafkasink: -log-level %q: want debug, info, warn or error\n", o.logLevel)
		return 2
	}
	handler, err := logHandler(o.logFormat, stderr, &slog.HandlerOptions{Level: level})
	if err != nil {
		fmt.Fprintln(stderr, "kafkasink:", err)
		return 2
	}
	logger := slog.New(handler)
	kcfg, pcfg, err := o.configs(logger)
	if err != nil {
		return fail(logger, err)
	}

	// New reads the checkpoint back; bound it so an unreachable cluster
	// ends the program instead of hanging it, but let a signal end it
	// sooner.
	nctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	inner, err := kafkasink.New(nctx, kcfg)
	cancel()
	if err != nil {
		return fail(logger, err)
	}
	sink := &countingSink{Sink: inner}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := inner.Close(cctx); err != nil {
			logger.Warn("closing the sink", "error", err)
		}
	}()
	logger.Info("sink started", "sink_id", kcfg.SinkID, "mode", kcfg.Mode.String(), "checkpoint", inner.Checkpoint().Position.String())

	var wg sync.WaitGroup
	pctx, stopProgress := context.WithCancel(ctx)
	if o.progress > 0 {
		wg.Go(func() { reportProgress(pctx, logger, pcfg.ConnString, pcfg.Slot, o.progress, sink) })
	}
	err = pgcdc.Run(ctx, pcfg, sink)
	stopProgress()
	wg.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		logger.Info("stopped by signal", "events", sink.events.Load(), "checkpoint", inner.Checkpoint().Position.String())
		return 0
	}
	return fail(logger, err)
}

// fail logs err and returns the exit status for it.
func fail(logger *slog.Logger, err error) int {
	logger.Error("stopped", "error", withFlagNames(err), "fenced", errors.Is(err, kafkasink.ErrFenced))
	var ce *kafkasink.ConfigError
	switch {
	case errors.As(err, &ce):
		return 2
	case errors.Is(err, kafkasink.ErrFenced):
		return 3
	}
	return 1
}

// countingSink counts what Writes delivered, for the progress log. Write
// is called by one goroutine at a time (pgcdc.Run's writer); the counters
// are read by the progress goroutine.
type countingSink struct {
	pgcdc.Sink
	events     atomic.Int64
	lastCommit atomic.Int64 // Unix nanoseconds of the newest written event's commit
}

func (s *countingSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	s.events.Add(int64(len(b.Events)))
	if n := len(b.Events); n > 0 && !b.Events[n-1].Commit.IsZero() {
		s.lastCommit.Store(b.Events[n-1].Commit.UnixNano())
	}
	return nil
}

// reportProgress logs every interval: events per second since the last
// report, the lag in bytes (the server's current WAL position minus the
// slot's confirmed_flush_lsn: WAL the slot holds back and that is not in
// Kafka yet) and in seconds (now minus the commit time of the newest event
// written). The seconds grow while the published tables are idle; the
// bytes tell whether that is lag or quiet.
func reportProgress(ctx context.Context, logger *slog.Logger, connString, slot string, every time.Duration, s *countingSink) {
	t := time.NewTicker(every)
	defer t.Stop()
	var db *pgx.Conn
	defer func() {
		if db != nil {
			db.Close(context.Background())
		}
	}()
	last, lastAt := s.events.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		n := s.events.Load()
		rate := float64(n-last) / now.Sub(lastAt).Seconds()
		last, lastAt = n, now

		attrs := []any{"events", n, "events_per_second", int64(rate + 0.5), "checkpoint", s.Checkpoint().Position.String()}
		if c := s.lastCommit.Load(); c != 0 {
			attrs = append(attrs, "lag_seconds", now.Sub(time.Unix(0, c)).Seconds())
		}
		lag, confirmed, err := slotLag(ctx, &db, connString, slot)
		if err != nil {
			// The database may be restarting; Run reconnects on its
			// own, and so does the next report.
			attrs = append(attrs, "lag_error", err)
		} else {
			attrs = append(attrs, "lag_bytes", lag, "confirmed_flush_lsn", confirmed)
		}
		logger.Info("progress", attrs...)
	}
}

// slotLag returns pg_current_wal_lsn() minus the slot's
// confirmed_flush_lsn, and the latter, on *db, connecting when needed.
func slotLag(ctx context.Context, db **pgx.Conn, connString, slot string) (int64, string, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if *db == nil {
		cc, err := pgx.ParseConfig(connString)
		if err != nil {
			return 0, "", err
		}
		// The connection string may ask for a replication connection;
		// this query needs an ordinary one.
		delete(cc.RuntimeParams, "replication")
		cc.RuntimeParams["application_name"] = "kafkasink-progress"
		if *db, err = pgx.ConnectConfig(qctx, cc); err != nil {
			*db = nil
			return 0, "", err
		}
	}
	var lag *int64
	var confirmed *string
	err := (*db).QueryRow(qctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag, &confirmed)
	if err != nil {
		(*db).Close(context.Background())
		*db = nil
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, "", fmt.Errorf("slot %q does not exist yet", slot)
		}
		return 0, "", err
	}
	if lag == nil || confirmed == nil {
		return 0, "", fmt.Errorf("slot %q has no confirmed position yet", slot)
	}
	return *lag, *confirmed, nil
}

// logHandler returns the log handler of -log-format: auto is text when w is
// a terminal, where a person reads it, and JSON otherwise, where a log
// collector does.
func logHandler(format string, w io.Writer, opts *slog.HandlerOptions) (slog.Handler, error) {
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	switch format {
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	case "text":
		return slog.NewTextHandler(w, opts), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json, text or auto", format)
}
