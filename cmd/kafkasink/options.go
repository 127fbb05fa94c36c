package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// options are the program's settings after flags, environment and
// configuration file.
type options struct {
	configFile, debeziumConfig                 string
	pgPassword, debeziumName                   string // from -debezium-config
	debeziumWarnings                           []string
	debeziumOrigins                            map[string]string // flag -> the file's property that set it
	filters                                    captureLists
	pg, pgPasswordFile                         string
	brokers, tables, slot, publication, sinkID string
	keyColumns                                 string
	create, snapshot, acceptPublicationTables  bool
	keylessTables, backfillAddedTables         bool
	slotGap                                    pgcdc.SlotGap
	failoverSlot                               bool
	failoverStandby                            string
	retainedWALWarn, spoolMaxBytes             int64
	snapshotWorkers                            int
	mode, prefix, template, encoder, keyFormat string
	headers, compression                       string
	annotations, annotationsIn                 string
	schemaRegistry                             registryOptions
	topicRoutes                                string
	checkpointTopic, deadLetter                string
	partitions, replicationFactor              int
	tlsCA, tlsCert, tlsKey, tlsServerName      string
	saslMechanism, saslUser                    string
	saslPassword, saslPasswordFile             string
	batchEvents, batchBytes                    int
	memoryLimit                                int64
	batchWait, txnTimeout, progress            time.Duration
	httpAddr                                   string
	httpAllowRemote                            bool
	readyMaxLagBytes                           int64
	readyMaxLag                                time.Duration
	logLevel, logFormat                        string
	debezium                                   debeziumOptions
	lease                                      leaseOptions
	outbox                                     outboxOptions
}

// registryOptions are the flags of the Schema Registry that -encoder avro
// and json-schema register their schemas with.
type registryOptions struct {
	url, user, passwordFile, tokenFile string
	tlsCA, tlsCert, tlsKey             string
	subjects, namespace                string
}

// registryDefaults are the flags' defaults.
var registryDefaults = registryOptions{subjects: kafkasinkavro.TopicName.String()}

// debeziumOptions are the flags of debezium.Encoder's options,
// each named after the Debezium connector property it mirrors (or, for
// the options Debezium lacks, prefixed debezium-).
type debeziumOptions struct {
	decimalHandling, timePrecision, intervalHandling, binaryHandling string
	tombstonesOnDelete, extendedHeaders                              bool
	skippedOperations, unavailablePlaceholder                        string
	lsnAsString, nullNestedArrays, matchLosses                       bool
	runID                                                            string
	provideTxnMetadata, schemasEnable                                bool
	transactionTopic                                                 string
	annotations                                                      bool
}

// debeziumDefaults are the flags' defaults: Debezium's.
var debeziumDefaults = debeziumOptions{
	decimalHandling: "precise", timePrecision: "adaptive", intervalHandling: "numeric", binaryHandling: "bytes",
	tombstonesOnDelete: true, extendedHeaders: true,
}

// setting is where a flag's value may come from besides the command line,
// and where -h lists it.
type setting struct {
	env   string // its environment variable
	want  string // what a valid value is, for errors; "" for strings, which all are
	group string // the topic -h lists it under, one of flagGroups
}

// flagGroups are the topics of the flags, in the order -h lists them.
var flagGroups = []string{"PostgreSQL", "Kafka", "Topics", "Records", "Schema Registry", "Debezium encoder", "Batches and memory", "Monitoring", "High availability", "Outbox"}

// defineFlags returns the program's flags, which set o, and the setting of
// each by name. Every flag has an environment variable and, but -config,
// a key in the configuration file (configKey).
func defineFlags(o *options) (*flag.FlagSet, map[string]setting) {
	fs := flag.NewFlagSet("kafkasink", flag.ContinueOnError)
	// parse says what is wrong in one line, and -h prints usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := flagDefiner{fs: fs, settings: make(map[string]setting)}
	f.str(&o.configFile, "config", "KAFKASINK_CONFIG", "", "YAML configuration file: a key for each flag, named as the flag with _ for - and . (see kafkasink.example.yaml); "+
		"flags win over environment variables, which win over the file")
	f.str(&o.debeziumConfig, "debezium-config", "KAFKASINK_DEBEZIUM_CONFIG", "", "a Debezium Server application.properties to run unchanged: each property it has is mapped to a flag or refused by name "+
		"(docs/debezium-server.md); it gives Debezium's defaults (-encoder debezium, -snapshot, -slot debezium, ...) and loses to the flags, the environment and -config")
	o.definePostgreSQLFlags(f.in("PostgreSQL"))
	o.defineKafkaFlags(f.in("Kafka"))
	o.defineTopicFlags(f.in("Topics"))
	o.defineRecordFlags(f.in("Records"))
	o.schemaRegistry.defineFlags(f.in("Schema Registry"))
	o.debezium.defineFlags(f.in("Debezium encoder"))
	o.defineBatchFlags(f.in("Batches and memory"))
	o.defineMonitoringFlags(f.in("Monitoring"))
	o.defineHAFlags(f.in("High availability"))
	o.outbox.defineFlags(f.in("Outbox"))
	return fs, f.settings
}

// flagDefiner defines flags in fs, and records in settings where else
// each flag's value may come from: its environment variable, which the
// flag's usage names so that -h shows it.
type flagDefiner struct {
	fs       *flag.FlagSet
	settings map[string]setting
	group    string // of the flags defined
}

// in is f defining the flags of group.
func (f flagDefiner) in(group string) flagDefiner {
	f.group = group
	return f
}

func (f flagDefiner) str(p *string, name, env, def, usage string) {
	f.fs.StringVar(p, name, def, usage+" ($"+env+")")
	f.settings[name] = setting{env: env, group: f.group}
}

func (f flagDefiner) num(p *int, name, env string, def int, usage string) {
	f.fs.IntVar(p, name, def, usage+" ($"+env+")")
	f.settings[name] = setting{env: env, want: "an integer", group: f.group}
}

func (f flagDefiner) num64(p *int64, name, env string, def int64, usage string) {
	f.fs.Int64Var(p, name, def, usage+" ($"+env+")")
	f.settings[name] = setting{env: env, want: "an integer", group: f.group}
}

func (f flagDefiner) dur(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.fs.DurationVar(p, name, def, usage+" ($"+env+")")
	f.settings[name] = setting{env: env, want: "a duration such as 250ms", group: f.group}
}

func (f flagDefiner) boolean(p *bool, name, env string, def bool, usage string) {
	f.fs.BoolVar(p, name, def, usage+" ($"+env+")")
	f.settings[name] = setting{env: env, want: "true or false", group: f.group}
}

// definePostgreSQLFlags defines the flags of the source: the connection,
// the slot, the publication and its tables, their keys, the snapshot, and
// what the program does when the slot cannot continue or holds too much.
func (o *options) definePostgreSQLFlags(f flagDefiner) {
	f.str(&o.pg, "pg", "KAFKASINK_PG", "", "PostgreSQL connection string (postgres:// URL or keyword/value); the role needs REPLICATION; "+
		"the password is best left out of it and given by -pg-password-file or $PGPASSWORD")
	f.str(&o.pgPasswordFile, "pg-password-file", "KAFKASINK_PG_PASSWORD_FILE", "", "file holding the PostgreSQL password (a trailing newline is dropped), read again for every connection, so it can rotate")
	f.str(&o.tables, "tables", "KAFKASINK_TABLES", "", `tables of the publication to create (an existing publication must have these tables, see -accept-publication-tables), comma-separated schema.table, names as stored; quote a name with a dot, comma or double quote as in SQL: public."a.b"; empty means FOR ALL TABLES`)
	f.str(&o.slot, "slot", "KAFKASINK_SLOT", "kafkasink", "logical replication slot")
	f.str(&o.publication, "publication", "KAFKASINK_PUBLICATION", "kafkasink", "publication")
	f.str(&o.keyColumns, "key-columns", "KAFKASINK_KEY_COLUMNS", "", "key columns of tables, as schema.table=col1,col2 separated by ';' (default: the replica identity, else the primary key)")
	f.boolean(&o.keylessTables, "keyless-tables", "KAFKASINK_KEYLESS_TABLES", false, "write the changes of tables without a primary key or replica identity index with a null key, "+
		"in partition 0, as Debezium does, and read them in the snapshot (which then cannot resume inside such a table); "+
		"default: keyed by event id, and the snapshot refuses them")
	f.boolean(&o.create, "create", "KAFKASINK_CREATE", true, "create the slot and the publication when missing")
	f.boolean(&o.acceptPublicationTables, "accept-publication-tables", "KAFKASINK_ACCEPT_PUBLICATION_TABLES", false,
		"stream an existing publication whose tables differ from -tables as it is, with a warning (default: refuse to start, naming the tables)")
	o.filters.defineFlags(f)
	f.boolean(&o.snapshot, "snapshot", "KAFKASINK_SNAPSHOT", false, "deliver the tables' existing rows before the changes")
	f.num(&o.snapshotWorkers, "snapshot-workers", "KAFKASINK_SNAPSHOT_WORKERS", 0, "connections reading the snapshot at once, each its own ranges of a table's key, in the one snapshot (0: pgcdc's default, 1)")
	f.boolean(&o.backfillAddedTables, "backfill-added-tables", "KAFKASINK_BACKFILL_ADDED_TABLES", true,
		"deliver the existing rows of a table that joins the publication while the program runs (or while it is stopped), as a backfill beside its changes (false: only its changes from then on)")
	f.fs.TextVar(&o.slotGap, "slot-gap", pgcdc.SlotGapRefuse, "when the slot cannot continue from the checkpoint (dropped, invalidated, moved by someone else, or a failover to a standby that lacks changes already in Kafka): "+
		"refuse, resnapshot (read the tables again from the new slot) or accept (stream on, the gap recorded in the checkpoint) ($KAFKASINK_SLOT_GAP)")
	f.settings["slot-gap"] = setting{env: "KAFKASINK_SLOT_GAP", want: "refuse, resnapshot or accept", group: f.group}
	f.boolean(&o.failoverSlot, "failover-slot", "KAFKASINK_FAILOVER_SLOT", true,
		"on a PostgreSQL 17+ primary, make the slot a failover slot, which a standby with sync_replication_slots keeps a copy of (docs/postgresql-failover.md)")
	f.str(&o.failoverStandby, "failover-standby", "KAFKASINK_FAILOVER_STANDBY", "",
		"connection string of a standby (PostgreSQL 17+) whose copy of the failover slot /readyz and /status report, and whose settings are checked at start-up (empty: none)")
	f.num64(&o.retainedWALWarn, "retained-wal-warn", "KAFKASINK_RETAINED_WAL_WARN", 0, "warn when the slot retains more WAL than this many bytes (0: 1 GiB; negative: never)")
	f.num64(&o.spoolMaxBytes, "spool-max-bytes", "KAFKASINK_SPOOL_MAX_BYTES", 0, "bound on the bytes spooled to disk for streamed transactions not yet committed; a larger transaction stops the program (0: 16 GiB; negative: no bound)")
}

// defineKafkaFlags defines the flags of the sink's connection to Kafka
// and of its identity, mode and checkpoints.
func (o *options) defineKafkaFlags(f flagDefiner) {
	f.str(&o.brokers, "brokers", "KAFKASINK_BROKERS", "", "Kafka seed brokers, comma-separated host:port")
	f.str(&o.tlsCA, "tls-ca", "KAFKASINK_TLS_CA", "", "PEM file of the CAs to trust; setting any -tls-* flag enables TLS")
	f.str(&o.tlsCert, "tls-cert", "KAFKASINK_TLS_CERT", "", "client certificate PEM file, for mutual TLS")
	f.str(&o.tlsKey, "tls-key", "KAFKASINK_TLS_KEY", "", "client key PEM file, for mutual TLS")
	f.str(&o.tlsServerName, "tls-server-name", "KAFKASINK_TLS_SERVER_NAME", "", "name to verify in the broker's certificate")
	f.str(&o.saslMechanism, "sasl-mechanism", "KAFKASINK_SASL_MECHANISM", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the password comes from -sasl-password-file or $KAFKASINK_SASL_PASSWORD")
	f.str(&o.saslUser, "sasl-user", "KAFKASINK_SASL_USER", "", "SASL user name")
	f.str(&o.saslPasswordFile, "sasl-password-file", "KAFKASINK_SASL_PASSWORD_FILE", "", "file holding the SASL password (a trailing newline is dropped), read at start-up; conflicts with $KAFKASINK_SASL_PASSWORD")
	f.str(&o.sinkID, "sink-id", "KAFKASINK_SINK_ID", "", "sink id: checkpoint key and base of the transactional id; default the slot name")
	f.str(&o.mode, "mode", "KAFKASINK_MODE", "exactly-once", "exactly-once, idempotent or plain")
	f.dur(&o.txnTimeout, "transaction-timeout", "KAFKASINK_TRANSACTION_TIMEOUT", 0, "Kafka transaction timeout (0: the sink's default)")
	f.str(&o.checkpointTopic, "checkpoint-topic", "KAFKASINK_CHECKPOINT_TOPIC", "", "checkpoint topic (default "+kafkasink.DefaultCheckpointTopic+")")
}

// defineTopicFlags defines the flags of the topics records go to.
func (o *options) defineTopicFlags(f flagDefiner) {
	f.str(&o.prefix, "topic-prefix", "KAFKASINK_TOPIC_PREFIX", "", "topics are <prefix>.<schema>.<table> (default prefix kafkasink)")
	f.str(&o.topicRoutes, "topic-routes", "KAFKASINK_TOPIC_ROUTES", "", `explicit topics, comma-separated schema.table=topic (names quoted as in -tables); they win over -topic-prefix and -topic-template, and tables listed with the same topic share it`)
	f.str(&o.template, "topic-template", "KAFKASINK_TOPIC_TEMPLATE", "", "topic template with {schema} and {table}; conflicts with -topic-prefix")
	f.num(&o.partitions, "partitions", "KAFKASINK_PARTITIONS", 0, "partitions of topics the sink creates (0: the broker's default)")
	f.num(&o.replicationFactor, "replication-factor", "KAFKASINK_REPLICATION_FACTOR", 0, "replication factor of topics the sink creates (0: the broker's default)")
	f.str(&o.deadLetter, "dead-letter-topic", "KAFKASINK_DEAD_LETTER_TOPIC", "", "topic for events that cannot be delivered (unroutable, unencodable, no key, too large), with headers naming the reason; empty stops the program on such an event instead")
}

// defineRecordFlags defines the flags of the records' form: the value's
// encoder, the key's format, headers, annotations and compression.
func (o *options) defineRecordFlags(f flagDefiner) {
	f.str(&o.encoder, "encoder", "KAFKASINK_ENCODER", "json", "record value: json (change event), upsert (row, tombstone on delete), debezium, avro (the change event, and the key, in Avro with their schemas in -schema-registry), "+
		"json-schema (the change event as json writes it, and the key, behind the ids of their JSON Schemas in -schema-registry), "+
		"or debezium-avro (Debezium's envelope and key in Avro as Kafka Connect's AvroConverter writes them, schemas in -schema-registry; the -encoder debezium flags apply)")
	f.str(&o.keyFormat, "key-format", "KAFKASINK_KEY_FORMAT", "text", "record key: text or json")
	f.str(&o.headers, "headers", "KAFKASINK_HEADERS", "all", "the sink's own headers on each record: all (kafkasink.id, .op, .table, .lsn and .commit_lsn), "+
		"minimal (kafkasink.id and kafkasink.op, what a consumer removing duplicates needs) or none (with -encoder debezium, Debezium's headers only); dead letters carry all")
	f.str(&o.annotations, "annotations", "KAFKASINK_ANNOTATIONS", "", "static key/values in every record, comma-separated key=value such as env=prod,region=eu-west-1 "+
		"(keys of [a-zA-Z0-9._-], not starting with kafkasink. or __; a value cannot hold a comma)")
	f.str(&o.annotationsIn, "annotations-in", "KAFKASINK_ANNOTATIONS_IN", "value", "where -annotations go: value (an annotations object; -encoder json and upsert, and debezium with -debezium-annotations), "+
		"headers (one header each, any encoder) or both")
	f.str(&o.compression, "compression", "KAFKASINK_COMPRESSION", "snappy", "compression of the record batches: none, snappy, lz4, zstd or gzip")
}

// defineFlags defines the Schema Registry's flags, which set r.
func (r *registryOptions) defineFlags(f flagDefiner) {
	def := registryDefaults
	f.str(&r.url, "schema-registry", "KAFKASINK_SCHEMA_REGISTRY", def.url, "-encoder avro, json-schema and debezium-avro: the Schema Registry's URL, comma-separated for several (Confluent's API; Apicurio Registry's ends in /apis/ccompat/v7)")
	f.str(&r.subjects, "schema-registry-subjects", "KAFKASINK_SCHEMA_REGISTRY_SUBJECTS", def.subjects, "-encoder avro and json-schema: the subjects of the schemas, Confluent's strategies: "+
		"TopicNameStrategy (<topic>-key and <topic>-value), RecordNameStrategy (<namespace>.Key and <namespace>.Envelope, the namespace [-schema-registry-namespace.]<schema>.<table>: a subject per table, for tables sharing a topic; "+
		"the Avro records' names, the JSON Schemas' titles) or TopicRecordNameStrategy (<topic>-<namespace>.Key and .Envelope)")
	f.str(&r.namespace, "schema-registry-namespace", "KAFKASINK_SCHEMA_REGISTRY_NAMESPACE", def.namespace, "-encoder avro and json-schema with RecordNameStrategy or TopicRecordNameStrategy: put before <schema>.<table> in the records' names and subjects, "+
		"so that pipelines of several databases can share a registry (such as the -topic-prefix)")
	f.str(&r.user, "schema-registry-user", "KAFKASINK_SCHEMA_REGISTRY_USER", def.user, "-encoder avro and json-schema: user name for the Schema Registry's basic authentication, with -schema-registry-password-file")
	f.str(&r.passwordFile, "schema-registry-password-file", "KAFKASINK_SCHEMA_REGISTRY_PASSWORD_FILE", def.passwordFile, "-encoder avro and json-schema: file holding the Schema Registry password (a trailing newline is dropped), read at start-up")
	f.str(&r.tokenFile, "schema-registry-token-file", "KAFKASINK_SCHEMA_REGISTRY_TOKEN_FILE", def.tokenFile, "-encoder avro and json-schema: file holding a bearer token for the Schema Registry (a trailing newline is dropped), "+
		"read again for every request, so it can rotate; conflicts with basic authentication")
	f.str(&r.tlsCA, "schema-registry-tls-ca", "KAFKASINK_SCHEMA_REGISTRY_TLS_CA", def.tlsCA, "-encoder avro and json-schema: PEM file of the CAs to trust for the Schema Registry's https:// URL (default: the system's)")
	f.str(&r.tlsCert, "schema-registry-tls-cert", "KAFKASINK_SCHEMA_REGISTRY_TLS_CERT", def.tlsCert, "-encoder avro and json-schema: client certificate PEM file, for a Schema Registry that requires mutual TLS; with -schema-registry-tls-key")
	f.str(&r.tlsKey, "schema-registry-tls-key", "KAFKASINK_SCHEMA_REGISTRY_TLS_KEY", def.tlsKey, "-encoder avro and json-schema: client key PEM file, with -schema-registry-tls-cert")
}

// defineFlags defines the Debezium encoder's flags, which set d.
func (d *debeziumOptions) defineFlags(f flagDefiner) {
	def := debeziumDefaults
	f.str(&d.decimalHandling, "decimal.handling.mode", "KAFKASINK_DECIMAL_HANDLING_MODE", def.decimalHandling, "-encoder debezium: numeric and money as precise (Connect Decimal), double or string")
	f.str(&d.timePrecision, "time.precision.mode", "KAFKASINK_TIME_PRECISION_MODE", def.timePrecision, "-encoder debezium: dates and times as adaptive, adaptive_time_microseconds, connect or isostring")
	f.str(&d.intervalHandling, "interval.handling.mode", "KAFKASINK_INTERVAL_HANDLING_MODE", def.intervalHandling, "-encoder debezium: intervals as numeric (microseconds) or string (ISO 8601)")
	f.str(&d.binaryHandling, "binary.handling.mode", "KAFKASINK_BINARY_HANDLING_MODE", def.binaryHandling, "-encoder debezium: bytea as bytes, base64, base64-url-safe or hex")
	f.boolean(&d.tombstonesOnDelete, "tombstones.on.delete", "KAFKASINK_TOMBSTONES_ON_DELETE", def.tombstonesOnDelete, "-encoder debezium: follow each delete with a tombstone")
	f.str(&d.skippedOperations, "skipped.operations", "KAFKASINK_SKIPPED_OPERATIONS", def.skippedOperations, `-encoder debezium: operations not written, comma-separated c, u, d, t, or none (default t)`)
	f.boolean(&d.provideTxnMetadata, "provide.transaction.metadata", "KAFKASINK_PROVIDE_TRANSACTION_METADATA", def.provideTxnMetadata, "-encoder debezium: a transaction block in each change, and BEGIN and END records around each transaction on -transaction.topic")
	f.str(&d.transactionTopic, "transaction.topic", "KAFKASINK_TRANSACTION_TOPIC", def.transactionTopic, "-encoder debezium: the topic of the BEGIN and END records (default <-slot>.transaction: Debezium's <topic.prefix>.transaction, the slot being source.name)")
	f.boolean(&d.schemasEnable, "schemas.enable", "KAFKASINK_SCHEMAS_ENABLE", def.schemasEnable, "-encoder debezium: keys and values with their Kafka Connect schemas, as JsonConverter writes them with schemas.enable=true")
	f.str(&d.unavailablePlaceholder, "unavailable.value.placeholder", "KAFKASINK_UNAVAILABLE_VALUE_PLACEHOLDER", def.unavailablePlaceholder, "-encoder debezium: value of an unchanged TOAST column (default __debezium_unavailable_value)")
	f.boolean(&d.extendedHeaders, "extended.headers.enabled", "KAFKASINK_EXTENDED_HEADERS_ENABLED", def.extendedHeaders, "-encoder debezium: add the __debezium.context.* headers")
	f.boolean(&d.lsnAsString, "debezium-lsn-as-string", "KAFKASINK_DEBEZIUM_LSN_AS_STRING", def.lsnAsString, "-encoder debezium: write source.lsn as a string (not a Debezium property), for readers that round numbers above 2^53")
	f.boolean(&d.nullNestedArrays, "debezium-null-nested-arrays", "KAFKASINK_DEBEZIUM_NULL_NESTED_ARRAYS", def.nullNestedArrays, "-encoder debezium: write the inner arrays of a multi-dimensional array as null, as Debezium does (not a Debezium property)")
	f.boolean(&d.matchLosses, "debezium-match-losses", "KAFKASINK_DEBEZIUM_MATCH_LOSSES", def.matchLosses, "-encoder debezium: write what Debezium writes where it loses a value (nested arrays, streamed name columns, BC dates of snapshot rows, trailing zeros of numerics without a declared scale), for consumers that must see exactly its output (not a Debezium property)")
	f.boolean(&d.annotations, "debezium-annotations", "KAFKASINK_DEBEZIUM_ANNOTATIONS", def.annotations, "-encoder debezium: with -annotations in the value, end the envelope with an annotations object (not a Debezium property: Debezium's envelope has no such field)")
	f.str(&d.runID, "debezium-run-id", "KAFKASINK_DEBEZIUM_RUN_ID", def.runID, "-encoder debezium: the __debezium.context.runId header (default: new for every run, as Debezium's)")
}

// defineBatchFlags defines the flags of the batches written to Kafka,
// and of the memory they may take.
func (o *options) defineBatchFlags(f flagDefiner) {
	f.num(&o.batchEvents, "batch-max-events", "KAFKASINK_BATCH_MAX_EVENTS", 0, "events per Write (0: pgcdc's default)")
	f.num(&o.batchBytes, "batch-max-bytes", "KAFKASINK_BATCH_MAX_BYTES", 0, "memory a batch (one Write) holds before it is written; the program holds at most two (0: pgcdc's default, 16 MiB)")
	f.num64(&o.memoryLimit, "memory-limit", "KAFKASINK_MEMORY_LIMIT", -1, "soft memory limit in bytes, at which the garbage collector works harder (runtime/debug.SetMemoryLimit); "+
		"-1: -batch-max-bytes + the sink's MaxTransactionBytes + 32 MiB (80 MiB with the defaults); 0: Go's default, no limit; a GOMEMLIMIT in the environment wins")
	f.dur(&o.batchWait, "batch-max-wait", "KAFKASINK_BATCH_MAX_WAIT", 0, "how long a batch waits for more transactions (0: none, written as soon as the previous Write returns)")
}

// defineMonitoringFlags defines the flags of what the program reports:
// its HTTP endpoints, progress and logs.
func (o *options) defineMonitoringFlags(f flagDefiner) {
	f.str(&o.httpAddr, "http-addr", "KAFKASINK_HTTP_ADDR", "", "address of the HTTP listener serving /metrics, /healthz, /readyz and /status, such as 127.0.0.1:9187 (empty: none); a loopback address unless -http-allow-remote")
	f.boolean(&o.httpAllowRemote, "http-allow-remote", "KAFKASINK_HTTP_ALLOW_REMOTE", false, "allow -http-addr to listen on other than a loopback address (its endpoints have no authentication)")
	f.num64(&o.readyMaxLagBytes, "ready-max-lag-bytes", "KAFKASINK_READY_MAX_LAG_BYTES", 0, "/readyz fails while the slot holds more WAL than this many bytes not yet in Kafka (0: no bound)")
	f.dur(&o.readyMaxLag, "ready-max-lag", "KAFKASINK_READY_MAX_LAG", 0, "/readyz fails while WAL is pending and the newest change in Kafka committed longer ago than this (0: no bound)")
	f.dur(&o.progress, "progress", "KAFKASINK_PROGRESS", 5*time.Second, "how often to report progress (a log record, or on a terminal the progress line); 0 disables")
	f.str(&o.logLevel, "log-level", "KAFKASINK_LOG_LEVEL", "info", "debug, info, warn or error")
	f.str(&o.logFormat, "log-format", "KAFKASINK_LOG_FORMAT", "auto", "json, text, or auto: text and a progress line on a terminal, JSON otherwise (for a log collector)")
}

// defineHAFlags defines the flags of high availability: the slot's
// lease.
func (o *options) defineHAFlags(f flagDefiner) {
	f.boolean(&o.lease.enabled, "ha", "KAFKASINK_HA", true, "high availability: stream only while holding the slot's lease in PostgreSQL, so that replicas with the same configuration wait in turn "+
		"(false: no lease, for a single instance; a second one would fence it)")
	f.dur(&o.lease.timeout, "lease-timeout", "KAFKASINK_LEASE_TIMEOUT", pgcdc.DefaultLeaseTimeout, "-ha: how long a replica that stopped renewing its lease (frozen, cut off) keeps it before a standby takes over; at least 1s")
}

// parse reads the settings. Each comes from the first of: the command line
// (args), its environment variable (getenv), the configuration file
// (-config), the default. The SASL password comes from the environment or
// a file only: a flag would show it in the process list. With -h it
// writes the usage to stderr and returns flag.ErrHelp.
//
// Every problem of the flags, the environment and the file is returned at
// once, as one *kafkasink.ConfigError, each naming the flag, its key and
// its variable; the options are returned with it, for configs to find
// the problems of the values too, unless the file could not be read
// (then most settings would be missing, and their problems noise).
func parse(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs, settings := defineFlags(o)
	var problems []string
	for rest := args; ; {
		err := fs.Parse(rest)
		if err == nil {
			break
		}
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr, fs, settings, false)
			return nil, err
		}
		problems = append(problems, flagProblem(err, settings))
		rest = fs.Args()
		if strings.HasPrefix(err.Error(), "flag provided but not defined") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			rest = rest[1:] // the unknown flag's value, most likely
		}
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q: every setting is a flag (kafkasink -h lists them)", fs.Args()))
	}
	problems = append(problems, environmentProblems(getenv)...)
	given := make(map[string]bool) // the flags set: on the command line, then by the environment or -config
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	set := func(name, value, from string) {
		if err := fs.Set(name, value); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q is not %s", from, value, settings[name].want)+where(name))
		}
	}
	if !given["config"] {
		if v := getenv(settings["config"].env); v != "" {
			set("config", v, "$"+settings["config"].env)
		}
	}
	var file map[string]fileValue
	if o.configFile != "" {
		var err error
		if file, err = loadConfigFile(o.configFile, fileKeys(fs)); err != nil {
			if ce := (*kafkasink.ConfigError)(nil); errors.As(err, &ce) {
				return nil, configError(append(problems, ce.Problems...))
			}
			return nil, configError(append(problems, err.Error()))
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || f.Name == "config" {
			return
		}
		if v := getenv(settings[f.Name].env); v != "" {
			set(f.Name, v, "$"+settings[f.Name].env)
		} else if v, ok := file[configKey(f.Name)]; ok {
			set(f.Name, v.value, fmt.Sprintf("%s:%d: %s", o.configFile, v.line, configKey(f.Name)))
		} else {
			return
		}
		given[f.Name] = true // the Debezium Server file loses to it
	})
	if o.debeziumConfig != "" {
		problems = append(problems, o.useDebeziumConfig(getenv, func(name string) bool { return given[name] }, set)...)
	}
	o.saslPassword = getenv("KAFKASINK_SASL_PASSWORD")
	return o, configError(problems)
}

// flagDiagnosis reads the flag package's errors: the flag, and what is
// wrong with it.
var flagDiagnosis = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`^flag provided but not defined: -(.*)$`), "unknown"},
	{regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:]*):`), "value"},
	{regexp.MustCompile(`^flag needs an argument: -(.*)$`), "no value"},
}

// flagProblem is the flag package's parse error err in one line naming
// the flag and what it takes.
func flagProblem(err error, settings map[string]setting) string {
	msg := err.Error()
	for _, d := range flagDiagnosis {
		m := d.re.FindStringSubmatch(msg)
		if m == nil {
			continue
		}
		switch d.kind {
		case "unknown":
			return fmt.Sprintf("unknown flag -%s%s: kafkasink -h lists the flags", m[1], flagSuggestion(m[1], settings))
		case "value":
			return fmt.Sprintf("-%s %s: want %s", m[2], m[1], settings[m[2]].want) + where(m[2])
		case "no value":
			return fmt.Sprintf("-%s needs a value", m[1]) + where(m[1])
		}
	}
	return msg
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

// parseAnnotations parses -annotations: "key=value" pairs separated by
// commas, spaces around each trimmed. The keys and values are checked by
// kafkasink.New.
func parseAnnotations(s string) (map[string]string, error) {
	out := make(map[string]string)
	for _, part := range splitList(s) {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, fmt.Errorf("-annotations %q: want key=value pairs separated by commas (a value cannot hold a comma)", part)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("-annotations names %q twice", k)
		}
		out[k] = strings.TrimSpace(v)
	}
	if len(out) == 0 {
		return nil, nil
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
