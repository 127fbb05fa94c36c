package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinkavro/jsonschema"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// configs turns options into the sink's and pgcdc's Configs, and checks
// everything that can be checked without connecting anywhere: the flags,
// and the Configs as kafkasink.New, pgcdc.Run and (with -ha)
// pgcdc.AcquireLease would check them. It returns every problem at once,
// as one *kafkasink.ConfigError in the program's terms (see speakFlags).
func (o *options) configs(logger *slog.Logger) (kafkasink.Config, pgcdc.Config, error) {
	// The checks are in the order that the error lists their problems in,
	// hence the two Configs are filled in turn.
	kcfg, problems := o.sinkConfig(logger)
	keyColumns, err := parseKeyColumns(o.keyColumns)
	if err != nil {
		problems = append(problems, err.Error())
	}
	problems = append(problems, o.setKafkaSecurity(&kcfg)...)
	pcfg := pgcdc.Config{
		ConnString:              o.pg,
		Slot:                    o.slot,
		Publication:             o.publication,
		Tables:                  splitNames(o.tables),
		CreateSlot:              o.create,
		CreatePublication:       o.create,
		Snapshot:                o.snapshot,
		SnapshotWorkers:         o.snapshotWorkers,
		AcceptPublicationTables: o.acceptPublicationTables,
		KeylessTables:           o.keylessTables,
		BackfillAddedTables:     o.backfillAddedTables,
		SlotGap:                 o.slotGap,
		NoFailoverSlot:          !o.failoverSlot,
		FailoverStandby:         o.failoverStandby,
		RetainedWALWarn:         o.retainedWALWarn,
		SpoolMaxBytes:           o.spoolMaxBytes,
		BatchMaxEvents:          o.batchEvents,
		BatchMaxBytes:           o.batchBytes,
		BatchMaxWait:            o.batchWait,
		KeyColumns:              keyColumns,
		Logger:                  logger,
	}
	problems = append(problems, o.filters.set(&pcfg)...)
	problems = append(problems, o.usePGPasswordFile(&pcfg)...)
	problems = append(problems, o.httpProblems()...)
	problems = append(problems, o.outbox.set(&pcfg)...)
	problems = append(problems, libraryProblems(kcfg.Validate())...)
	pgProblems := libraryProblems(pcfg.Validate())
	problems = append(problems, pgProblems...)
	if o.lease.enabled {
		// The lease's connection string and slot are pgcdc's, whose
		// problems are already listed.
		listed := make(map[string]bool)
		for _, p := range pgProblems {
			listed[subject(p)] = true
		}
		for _, p := range libraryProblems(leaseConfig(pcfg, o.lease, logger).Validate()) {
			if !listed[subject(p)] {
				problems = append(problems, p)
			}
		}
	}
	return kcfg, pcfg, configError(o.blameDebeziumConfig(problems))
}

// sinkConfig is the sink's Config but for its TLS and SASL, and the
// problems of the flags it comes from.
func (o *options) sinkConfig(logger *slog.Logger) (kafkasink.Config, []string) {
	sinkID := o.sinkID
	if sinkID == "" {
		sinkID = o.slot
	}
	cfg := kafkasink.Config{
		Brokers:            splitList(o.brokers),
		SinkID:             sinkID,
		TransactionTimeout: o.txnTimeout,
		CheckpointTopic:    o.checkpointTopic,
		Topics: kafkasink.Topics{
			Prefix: o.prefix, Template: o.template,
			Partitions: int32(o.partitions), ReplicationFactor: int16(o.replicationFactor),
		},
		DeadLetterTopic: o.deadLetter,
		Logger:          logger,
		// The write receipts are logged at Debug; not computed unless
		// they are (see Config.Receipts).
		Receipts: logger != nil && logger.Enabled(context.Background(), slog.LevelDebug),
	}
	var problems []string
	var err error
	if cfg.Mode, err = kafkasink.ParseMode(o.mode); err != nil {
		problems = append(problems, fmt.Sprintf("-mode %q: want exactly-once, idempotent or plain", o.mode))
	}
	var encProblems, routeProblems []string
	cfg.Encoder, encProblems = o.newEncoder()
	problems = append(problems, encProblems...)
	problems = append(problems, o.setRecordFormat(&cfg)...)
	cfg.Topics.Routes, routeProblems = parseTopicRoutes(o.topicRoutes)
	return cfg, append(problems, routeProblems...)
}

// newEncoder returns the record values' encoder that -encoder names, and
// the problems of its flags, and of the flags of the encoders not chosen.
func (o *options) newEncoder() (kafkasink.Encoder, []string) {
	var problems []string
	var enc kafkasink.Encoder
	switch o.encoder {
	case "json":
		enc = kafkasink.JSONEncoder{}
	case "upsert":
		enc = kafkasink.UpsertEncoder{}
	case "debezium":
		enc, problems = o.debeziumEncoder()
	// The registry flags' problems are the program's; the encoders'
	// constructors' are the library's, in its terms. A constructor's nil
	// pointer must not become a non-nil Encoder, which the sink's check
	// would call: each case sets enc on success only.
	case "avro":
		avro, err := o.schemaRegistry.config()
		if err != nil {
			problems = append(problems, err.Error())
			break
		}
		a, err := kafkasinkavro.New(avro)
		if problems = append(problems, libraryProblems(err)...); err == nil {
			enc = a
		}
	case "json-schema":
		avro, err := o.schemaRegistry.config()
		if err != nil {
			problems = append(problems, err.Error())
			break
		}
		js, err := jsonschema.New(jsonschema.Config{Registry: avro.Registry, Subjects: avro.Subjects, Namespace: avro.Namespace})
		if problems = append(problems, libraryProblems(err)...); err == nil {
			enc = js
		}
	case "debezium-avro":
		var dbz debezium.Encoder
		dbz, problems = o.debeziumEncoder()
		avro, err := o.schemaRegistry.config()
		if err != nil {
			problems = append(problems, err.Error())
			break
		}
		a, err := kafkasinkavro.NewDebezium(avro, dbz)
		if problems = append(problems, libraryProblems(err)...); err == nil {
			enc = a
		}
	default:
		problems = append(problems, fmt.Sprintf("-encoder %q: want json, upsert, debezium, avro, json-schema or debezium-avro", o.encoder))
	}
	if changed := o.schemaRegistry.changed(); o.encoder != "avro" && o.encoder != "json-schema" && o.encoder != "debezium-avro" && changed != nil {
		problems = append(problems, fmt.Sprintf("the Schema Registry's flags (%s) apply to -encoder avro, json-schema and debezium-avro only, not %q", strings.Join(changed, ", "), o.encoder))
	}
	if o.encoder != "debezium" && o.encoder != "debezium-avro" && o.debezium != debeziumDefaults {
		problems = append(problems, fmt.Sprintf("the Debezium encoder's flags (%s) apply to -encoder debezium and debezium-avro only, not %q", strings.Join(o.debezium.changed(), ", "), o.encoder))
	}
	return enc, problems
}

// debeziumEncoder is the Debezium encoder of -encoder debezium and
// debezium-avro, named after the slot: its source.name (see
// -transaction.topic).
func (o *options) debeziumEncoder() (debezium.Encoder, []string) {
	dbz, problems := o.debezium.encoder()
	dbz.Name = o.slot
	if o.debeziumName != "" {
		dbz.Name = o.debeziumName
	}
	return dbz, problems
}

// setRecordFormat sets what the sink writes around each record's value:
// the key's format, the headers, the annotations, and the batches'
// compression. It returns the problems of their flags.
func (o *options) setRecordFormat(c *kafkasink.Config) []string {
	var problems []string
	switch o.keyFormat {
	case "text":
		c.KeyFormat = kafkasink.KeyText
	case "json":
		c.KeyFormat = kafkasink.KeyJSON
	default:
		problems = append(problems, fmt.Sprintf("-key-format %q: want text or json", o.keyFormat))
	}
	var err error
	if c.Headers, err = kafkasink.ParseHeaderSet(o.headers); err != nil {
		problems = append(problems, fmt.Sprintf("-headers %q: want all, minimal or none", o.headers))
	}
	if c.Annotations, err = parseAnnotations(o.annotations); err != nil {
		problems = append(problems, err.Error())
	}
	if c.AnnotationsIn, err = kafkasink.ParseAnnotationPlace(o.annotationsIn); err != nil {
		problems = append(problems, fmt.Sprintf("-annotations-in %q: want value, headers or both", o.annotationsIn))
	}
	codec, err := kafkasink.ParseCompression(o.compression)
	if err != nil {
		problems = append(problems, fmt.Sprintf("-compression %q: want none, snappy, lz4, zstd or gzip", o.compression))
	}
	c.ClientOptions = []kgo.Opt{kgo.ProducerBatchCompression(codec)}
	return problems
}

// parseTopicRoutes parses -topic-routes: schema.table=topic pairs
// separated by commas, table names quoted as in -tables. The map is not
// nil even when s is empty; a problem names each malformed pair.
func parseTopicRoutes(s string) (map[string]string, []string) {
	var problems []string
	routes := make(map[string]string)
	for _, r := range splitNames(s) {
		i := strings.LastIndexByte(r, '=')
		if i < 0 {
			problems = append(problems, fmt.Sprintf("-topic-routes entry %q: want schema.table=topic", r))
			continue
		}
		routes[strings.TrimSpace(r[:i])] = strings.TrimSpace(r[i+1:])
	}
	return routes, problems
}

// saslMechanisms are the SASL mechanisms of -sasl-mechanism: those
// that take a user name and a password.
var saslMechanisms = []kafkasink.SASLMechanism{kafkasink.SASLPlain, kafkasink.SASLScramSHA256, kafkasink.SASLScramSHA512}

// setKafkaSecurity sets the sink's TLS, when any -tls-* flag is set, and
// its SASL, with -sasl-mechanism. It returns the problems of the SASL
// flags; the rest is checked with the sink's Config.
func (o *options) setKafkaSecurity(c *kafkasink.Config) []string {
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" || o.tlsServerName != "" {
		c.TLS = &kafkasink.TLS{CAFile: o.tlsCA, CertFile: o.tlsCert, KeyFile: o.tlsKey, ServerName: o.tlsServerName}
	}
	if o.saslMechanism == "" {
		if o.saslUser != "" || o.saslPasswordFile != "" || o.saslPassword != "" {
			return []string{"-sasl-mechanism is not set, but -sasl-user, -sasl-password-file or $KAFKASINK_SASL_PASSWORD is: " +
				"set -sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), or remove the others"}
		}
		return nil
	}
	mechanism := kafkasink.SASLMechanism(strings.ToUpper(o.saslMechanism))
	if !slices.Contains(saslMechanisms, mechanism) {
		return []string{fmt.Sprintf("-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", o.saslMechanism)}
	}
	password, err := o.saslPasswordValue()
	if err != nil {
		return []string{err.Error()}
	}
	c.SASL = &kafkasink.SASL{Mechanism: mechanism, Username: o.saslUser, Password: kafkasink.Secret(password)}
	return nil
}

// usePGPasswordFile has c read the PostgreSQL password from
// -pg-password-file, when set, and returns its problems: the file is read
// now too, so that a missing one stops the program at start-up.
func (o *options) usePGPasswordFile(c *pgcdc.Config) []string {
	if o.pgPassword != "" { // from -debezium-config
		c.ConfigureConn = func(_ context.Context, c *pgconn.Config) error {
			c.Password = o.pgPassword
			return nil
		}
		if o.pgPasswordFile != "" {
			return []string{"-pg-password-file is set and -debezium-config has debezium.source.database.password: give the password one way"}
		}
		return nil
	}
	if o.pgPasswordFile == "" {
		return nil
	}
	var problems []string
	if connStringHasPassword(o.pg) {
		problems = append(problems, "-pg holds a password and -pg-password-file is set: give the password one way")
	}
	if _, err := readSecretFile("-pg-password-file", o.pgPasswordFile); err != nil {
		problems = append(problems, err.Error())
	}
	c.ConfigureConn = o.setPGPassword
	return problems
}

// saslPasswordValue is the SASL password: from -sasl-password-file or
// $KAFKASINK_SASL_PASSWORD.
func (o *options) saslPasswordValue() (string, error) {
	if o.saslPasswordFile == "" {
		return o.saslPassword, nil
	}
	if o.saslPassword != "" {
		return "", errors.New("$KAFKASINK_SASL_PASSWORD and -sasl-password-file are both set: give the password one way")
	}
	return readSecretFile("-sasl-password-file", o.saslPasswordFile)
}

// setPGPassword is pgcdc.Config.ConfigureConn with -pg-password-file: the
// file is read for every connection, so that a rotated password is used
// from the next connection on.
func (o *options) setPGPassword(_ context.Context, c *pgconn.Config) error {
	password, err := readSecretFile("-pg-password-file", o.pgPasswordFile)
	if err != nil {
		return err
	}
	c.Password = password
	return nil
}

// encoder returns the debezium.Encoder the options describe, and a
// problem for each mode flag whose value is not one of Debezium's. The
// other values are checked by kafkasink.New.
func (d debeziumOptions) encoder() (debezium.Encoder, []string) {
	var problems []string
	mode := func(flag, value, want string, ok bool) {
		if !ok {
			problems = append(problems, fmt.Sprintf("-%s %q: want %s", flag, value, want))
		}
	}
	enc := debezium.Encoder{
		DisableTombstones:           !d.tombstonesOnDelete,
		SkippedOperations:           d.skippedOperations,
		DisableExtendedHeaders:      !d.extendedHeaders,
		RunID:                       d.runID,
		LSNAsString:                 d.lsnAsString,
		UnavailableValuePlaceholder: d.unavailablePlaceholder,
		NullNestedArrays:            d.nullNestedArrays,
		MatchDebeziumLosses:         d.matchLosses,
		ProvideTransactionMetadata:  d.provideTxnMetadata,
		TransactionTopic:            d.transactionTopic,
		WriteAnnotations:            d.annotations,
		SchemasEnable:               d.schemasEnable,
	}
	var ok bool
	enc.DecimalHandling, ok = debezium.ParseDecimalMode(d.decimalHandling)
	mode("decimal.handling.mode", d.decimalHandling, "precise, double or string", ok)
	enc.TimePrecision, ok = debezium.ParseTimePrecisionMode(d.timePrecision)
	mode("time.precision.mode", d.timePrecision, "adaptive, adaptive_time_microseconds, connect or isostring", ok)
	enc.IntervalHandling, ok = debezium.ParseIntervalMode(d.intervalHandling)
	mode("interval.handling.mode", d.intervalHandling, "numeric or string", ok)
	enc.BinaryHandling, ok = debezium.ParseBinaryMode(d.binaryHandling)
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
		{"-debezium-match-losses", d.matchLosses != def.matchLosses},
		{"-provide.transaction.metadata", d.provideTxnMetadata != def.provideTxnMetadata},
		{"-transaction.topic", d.transactionTopic != def.transactionTopic},
		{"-debezium-run-id", d.runID != def.runID},
		{"-debezium-annotations", d.annotations != def.annotations},
		{"-schemas.enable", d.schemasEnable != def.schemasEnable},
	} {
		if f.changed {
			names = append(names, f.name)
		}
	}
	return names
}
