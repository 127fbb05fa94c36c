package kafkasink

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/ownedopts"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// Mode selects the delivery guarantee.
type Mode uint8

// The delivery modes. The zero Mode is ExactlyOnce.
const (
	// ExactlyOnce writes each batch and its checkpoint in one Kafka
	// transaction: a read_committed consumer sees every event once.
	ExactlyOnce Mode = iota
	// Idempotent writes with an idempotent producer and acks=all, then the
	// checkpoint: at least once, duplicates only after a crash or a failed
	// Write, bounded by the events since the last checkpoint.
	Idempotent
	// Plain writes without idempotence, for brokers that lack it: at least
	// once with acks=all; a retried request can reorder records.
	Plain
)

// String returns "exactly-once", "idempotent" or "plain".
func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case Idempotent:
		return "idempotent"
	case Plain:
		return "plain"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses the text String returns.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ExactlyOnce, Idempotent, Plain} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("kafkasink: unknown mode %q: want exactly-once, idempotent or plain", s)
}

// Acks is how many replicas must have a record before the broker
// acknowledges it. Only Plain mode may lower it.
type Acks uint8

// The acknowledgement levels. The zero Acks is AcksAll.
const (
	AcksAll    Acks = iota // every in-sync replica (acks=all)
	AcksLeader             // the partition leader only (acks=1)
	AcksNone               // no acknowledgement (acks=0): records can be lost silently by the broker
)

// Topics says where events go and whether the sink creates the topics.
//
// Routing tries, in order: Route, Routes, Template, Prefix. The first that
// names a topic for the event's table wins. Schema and table names are put
// into Template and Prefix verbatim, in the case PostgreSQL stores them:
// nothing is escaped, lowered or replaced. A table whose name makes a
// topic name Kafka refuses (see ValidateTopicName: a space, a quote, a
// slash, non-ASCII letters, a very long name) is rejected with
// ReasonUnroutable, every one of its events, until it has a Routes entry
// (or Route answers for it).
//
// Two tables never share a topic by accident: "a.b".c and a."b.c" both
// make <Prefix>.a.b.c, and a Template such as "{schema}_{table}" makes
// a_b_c of both a_b.c and a.b_c. The first table to reach a topic claims
// it; another table reaching it fails Write with a fatal *ConfigError
// naming both tables, unless the topic is in Shared or both tables reach
// it through Routes entries. So do topics whose names differ only in '.'
// and '_' (Kafka refuses to create both), and a table routed to the
// checkpoint or dead-letter topic. The sink compares the tables it has
// seen since New: two tables whose events first arrive in different runs
// of the sink are not compared.
type Topics struct {
	// Route, when set, names the topic of every event. An error rejects
	// the event (ReasonUnroutable). Tables it routes to one topic must
	// list that topic in Shared.
	Route func(schema, table string) (string, error)
	// Routes maps a table, "schema.table" as ParseTableName reads it
	// (public."a.b" for a name with a dot), to a topic. Tables whose
	// entries name the same topic share it on purpose.
	Routes map[string]string
	// Template names the topic with {schema} and {table} placeholders,
	// such as "cdc.{schema}.{table}". Conflicts with Prefix.
	Template string
	// Prefix routes to "<Prefix>.<schema>.<table>". Default "kafkasink"
	// when Template is empty.
	Prefix string
	// Shared lists the topics that several tables may route to on
	// purpose, by any of the above (such as the shards of one table
	// routed together by Route).
	Shared []string

	// MustExist, when true, makes a missing topic a fatal error
	// (ErrTopicMissing) instead of creating it. The sink never lets the
	// broker auto-create a topic, whatever auto.create.topics.enable says.
	MustExist bool
	// Partitions for topics the sink creates. Default -1: the broker's
	// num.partitions.
	Partitions int32
	// ReplicationFactor for topics the sink creates. Default -1: the
	// broker's default.replication.factor.
	ReplicationFactor int16
	// Configs for topics the sink creates, such as
	// {"cleanup.policy": "compact"}.
	Configs map[string]string
}

// Config configures a sink. New copies it; later changes have no effect.
// The zero value of every field but Brokers and SinkID is a usable default.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// SinkID names this sink: its checkpoint key and the base of its
	// transactional id. It must stay the same across restarts and be
	// unique among sinks sharing a checkpoint topic. Required;
	// [a-zA-Z0-9._-], at most 200 bytes.
	SinkID string
	// Mode is the delivery guarantee. Default ExactlyOnce.
	Mode Mode

	// TransactionalID is the Kafka transactional.id. Default
	// "kafkasink-" + SinkID. Only for ExactlyOnce.
	TransactionalID string
	// TransactionTimeout is the broker's limit on one transaction; a
	// transaction that runs longer is aborted by the broker. Default 60s;
	// between 1s and the broker's transaction.max.timeout.ms (15m by
	// default). Only for ExactlyOnce.
	TransactionTimeout time.Duration
	// CommitTimeout bounds one commit request. Default a third of
	// TransactionTimeout; must be below TransactionTimeout. A commit whose
	// outcome is unknown when it expires is resolved by reading the
	// checkpoint back. Only for ExactlyOnce.
	CommitTimeout time.Duration
	// MaxTransactionRecords splits a batch into transactions of at most
	// this many events; each carries its own checkpoint. Default 40000:
	// every transaction costs round trips and markers on the broker
	// whatever its size, and with 10000 exactly-once was markedly slower
	// on the pgcdc replication benchmark.
	MaxTransactionRecords int
	// MaxTransactionBytes splits a batch into transactions of at most
	// about this many encoded bytes. Default 32 MiB.
	MaxTransactionBytes int

	// CheckpointTopic holds the checkpoints, keyed by SinkID. Default
	// "kafkasink.checkpoints". Created compacted when missing.
	CheckpointTopic string

	// Topics routes events to topics.
	Topics Topics
	// KeyColumns maps a table, "schema.table", to the columns that form
	// the record key (see TableKeys). Tables not listed use the event's
	// key columns, else the event id.
	KeyColumns TableKeys
	// KeyFormat is the key's encoding. Default KeyText.
	KeyFormat KeyFormat
	// Encoder turns events into record values. Default JSONEncoder{}.
	Encoder Encoder
	// Headers selects the sink's own headers on the records of events
	// (see HeaderSet). Default HeadersAll.
	Headers HeaderSet
	// Annotations are static key/values echoed in every record of an
	// event, such as {"env": "prod", "region": "eu-west-1"}, where
	// AnnotationsIn says; nil or empty writes none. A key is 1 to
	// MaxAnnotationKeyLen bytes of [a-zA-Z0-9._-] and starts with neither
	// "kafkasink." (the sink's headers) nor "__" (Kafka's tools' and
	// Kafka Connect's); a value is any UTF-8 text. Keys are written in
	// sorted order. Neither the checkpoint records nor the Encoder's
	// records around events (a Framer's) carry them.
	Annotations map[string]string
	// AnnotationsIn says where the records carry Annotations (see
	// AnnotationPlace). Default AnnotateValue. Set only with Annotations.
	AnnotationsIn AnnotationPlace

	// DeadLetterTopic, when set, receives rejected events in the same
	// transaction as their batch, instead of failing the batch. Each
	// record carries the event: its key (the event id when no key could
	// be made), a value as HeaderValue says, the five standard headers
	// and HeaderReason, HeaderError, HeaderTopic and HeaderValue. An
	// event keeps the records a Framer writes around it. It is created
	// with Topics' creation settings unless Topics.MustExist; no table
	// may route to it.
	DeadLetterTopic string

	// MaxRecordBytes caps one record (key, value and headers), and is the
	// producer's batch size limit. Default 1000012, under the broker's
	// default message.max.bytes. Events over it, or over the topic's
	// max.message.bytes, are rejected before producing.
	MaxRecordBytes int
	// Acks for Plain mode. Default AcksAll; the other modes require it.
	Acks Acks

	// Logger receives the sink's and the Kafka client's logs. nil
	// discards them.
	Logger *slog.Logger
	// Hooks observe the sink: values implementing any of the Hook
	// interfaces in hooks.go.
	Hooks []Hook
	// Receipts makes each Write report its write receipts in
	// BatchInfo.Receipts, and log them at Debug level: per topic, the
	// records, their value bytes and the CRC32C of their values (see
	// Receipt). The zero value, false, computes none: they add 5 to 8%
	// to the time to plan a batch, the Write's serial phase
	// (BenchmarkReceipts beside BenchmarkPlan).
	Receipts bool

	// Guard, when set, is asked in ExactlyOnce mode before each request
	// that could touch the transaction of another instance with this
	// sink's transactional id: beginning, committing and aborting a
	// transaction, and re-initialising the producer id after an unclear
	// outcome (KIP-360), which makes the broker abort whatever
	// transaction is open under the id, a newer instance's included,
	// before it answers that this one is fenced. An error stops the sink
	// as fenced (ErrFenced, wrapping it) without sending the request.
	// Instances that take turns on a lease give its check (pgcdc's
	// Lease.Check), so that one resumed after a freeze stops before it
	// disturbs its successor. nil asks nothing; the other modes, which
	// have no transactions, never ask.
	//
	// A guard is also the proof that no other instance holds the id: a
	// guarded sink that the broker fences without a newer instance (its
	// timeout abort of a transaction that outlived
	// Config.TransactionTimeout, or an older instance's recovery, which
	// makes Kafka abort this instance's open transaction) and whose client
	// cannot recover its producer id claims the transactional id afresh,
	// in-process, when the guard consents right before the claim, and goes
	// on; unguarded, it stops as fenced. Fenced again within a
	// TransactionTimeout of such a claim, it stops: the guard let another
	// instance go on.
	Guard func() error

	// TLS, when set, encrypts connections to the brokers; see TLS.
	TLS *TLS
	// SASL, when set, authenticates the sink; see SASL.
	SASL *SASL

	// ClientOptions pass through to the franz-go client for what Config
	// does not cover: compression, timeouts, a custom dialer. Compression
	// is franz-go's default, snappy, unless an option such as
	// kgo.ProducerBatchCompression(kgo.ZstdCompression()) says otherwise
	// (zstd wrote 27% fewer bytes than snappy on 1 KB rows and 59% fewer
	// on 200 B ones in docs/benchmarks.md's measurements, for up to half the
	// throughput on the larger rows). Options the sink owns are refused, not
	// overridden: SeedBrokers, TransactionalID, TransactionTimeout,
	// DisableIdempotentWrite, RequiredAcks, RecordPartitioner,
	// ProducerBatchMaxBytes, AllowAutoTopicCreation, DialTLSConfig, SASL,
	// WithLogger (use Logger, which receives franz-go's log too), and
	// consumer options. franz-go's hook plugins (kprom, kotel) pass
	// through with kgo.WithHooks; a hook that keeps a record past its
	// produce callback must copy its key, value and headers, whose
	// memory the sink reuses for the next batch.
	ClientOptions []kgo.Opt

	// annotationHeaders are the headers of Annotations, made by validate
	// (see annotate); nil when they go in the value only.
	annotationHeaders []kgo.RecordHeader
}

// Defaults applied by New.
const (
	DefaultCheckpointTopic       = "kafkasink.checkpoints"
	DefaultTopicPrefix           = "kafkasink"
	DefaultTransactionTimeout    = 60 * time.Second
	DefaultMaxTransactionRecords = 40000
	DefaultMaxTransactionBytes   = 32 << 20
	DefaultMaxRecordBytes        = 1000012
)

// String describes the config without anything secret: passwords are
// Secrets, and ClientOptions may hold credentials, so only their count is
// shown.
func (c Config) String() string {
	sasl := "none"
	if c.SASL != nil {
		sasl = fmt.Sprintf("%s user %q", c.SASL.Mechanism, c.SASL.Username)
	}
	return fmt.Sprintf("kafkasink.Config{Brokers:%v SinkID:%q Mode:%s CheckpointTopic:%q TLS:%t SASL:%s ClientOptions:%d}",
		c.Brokers, c.SinkID, c.Mode, c.CheckpointTopic, c.TLS != nil, sasl, len(c.ClientOptions))
}

// GoString is String, so %#v does not print secrets either.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb: a verb String does not serve, such
// as %t, would otherwise print every field, the SASL password included.
func (c Config) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// Validate checks c as New does, without connecting: it returns every
// problem at once as one *ConfigError, or nil when New would accept c. A
// program calls it to report configuration errors before it waits for
// anything or connects anywhere.
func (c Config) Validate() error {
	c = c.withDefaults()
	return c.validate()
}

// withDefaults returns a copy of c with every zero field set to its
// default. Maps and slices are cloned so the caller's later changes do not
// reach a running sink.
func (c Config) withDefaults() Config {
	c.Brokers = slices.Clone(c.Brokers)
	c.Topics.Routes = maps.Clone(c.Topics.Routes)
	c.Topics.Shared = slices.Clone(c.Topics.Shared)
	c.Topics.Configs = maps.Clone(c.Topics.Configs)
	c.KeyColumns = maps.Clone(c.KeyColumns)
	c.Annotations = maps.Clone(c.Annotations)
	c.Hooks = slices.Clone(c.Hooks)
	c.ClientOptions = slices.Clone(c.ClientOptions)
	if c.TransactionalID == "" && c.SinkID != "" {
		c.TransactionalID = "kafkasink-" + c.SinkID
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = c.TransactionTimeout / 3
	}
	if c.MaxTransactionRecords == 0 {
		c.MaxTransactionRecords = DefaultMaxTransactionRecords
	}
	if c.MaxTransactionBytes == 0 {
		c.MaxTransactionBytes = DefaultMaxTransactionBytes
	}
	if c.CheckpointTopic == "" {
		c.CheckpointTopic = DefaultCheckpointTopic
	}
	if c.Topics.Prefix == "" && c.Topics.Template == "" {
		c.Topics.Prefix = DefaultTopicPrefix
	}
	if c.Topics.Partitions == 0 {
		c.Topics.Partitions = -1
	}
	if c.Topics.ReplicationFactor == 0 {
		c.Topics.ReplicationFactor = -1
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if c.Encoder == nil {
		c.Encoder = JSONEncoder{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks every rule on a defaulted Config and returns all
// problems at once. Valid annotations it gives to the records (annotate):
// whether the Encoder takes them is a rule only the Encoder can check.
func (c *Config) validate() error {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if ap := c.annotationProblems(); len(ap) > 0 {
		p = append(p, ap...)
	} else {
		p = append(p, c.annotate()...)
	}

	if len(c.Brokers) == 0 {
		add("Brokers is empty: give at least one host:port")
	}
	if v, ok := c.Encoder.(Validator); ok {
		if err := v.Validate(); err != nil {
			if ce := (*ConfigError)(nil); errors.As(err, &ce) {
				p = append(p, ce.Problems...)
			} else {
				p = append(p, err.Error())
			}
		}
	}
	if k, ok := c.Encoder.(AllKeysEncoder); ok && k.EncodesAllKeys() && c.KeyFormat != KeyJSON {
		what, fix := explain(c.Encoder, FeatureAllKeys, "AllKeysEncoder.EncodesAllKeys")
		if fix != "" {
			fix = ", or " + fix
		}
		add("KeyFormat is %s, but the Encoder writes every record key itself (%s): set KeyFormat to KeyJSON (-key-format json)%s", c.KeyFormat, what, fix)
	}
	for _, b := range c.Brokers {
		if b == "" || strings.ContainsAny(b, " \t\n,") {
			add("Brokers has %q: want one host:port per entry", b)
		}
	}
	if c.SinkID == "" {
		add("SinkID is empty: give each sink a stable id, it keys the checkpoint and the transactional id")
	} else if len(c.SinkID) > 200 || !topicadmin.ValidChars(c.SinkID) {
		add("SinkID %q: use at most 200 bytes of [a-zA-Z0-9._-]", c.SinkID)
	}
	p = append(p, c.deliveryProblems()...)
	if err := topicadmin.ValidateName(c.CheckpointTopic); err != nil {
		add("CheckpointTopic: %v", err)
	}
	if t := frameTopic(c.Encoder); t != "" && (t == c.CheckpointTopic || t == c.DeadLetterTopic) {
		what, _ := explain(c.Encoder, FeatureFrameTopic, "Framer.FrameTopic")
		add("the topic of the records the Encoder writes around events (%s) %q is also CheckpointTopic or DeadLetterTopic: use a topic of its own", what, t)
	}
	if c.DeadLetterTopic != "" {
		if err := topicadmin.ValidateName(c.DeadLetterTopic); err != nil {
			add("DeadLetterTopic: %v", err)
		}
		if c.DeadLetterTopic == c.CheckpointTopic {
			add("DeadLetterTopic and CheckpointTopic are both %q: use separate topics", c.DeadLetterTopic)
		}
	}
	p = append(p, c.Topics.problems()...)
	p = append(p, c.KeyColumns.Check("KeyColumns")...)
	if c.Headers > HeadersNone {
		add("Headers %d is unknown: use HeadersAll, HeadersMinimal or HeadersNone", c.Headers)
	}
	if c.KeyFormat > KeyJSON {
		add("KeyFormat %d is unknown: use KeyText or KeyJSON", c.KeyFormat)
	}
	p = append(p, c.securityProblems()...)
	p = append(p, unknownHooks(c.Hooks)...)
	p = append(p, ownedopts.Problems(c.ClientOptions)...)
	if len(p) > 0 {
		return &ConfigError{Problems: p}
	}
	return nil
}

// deliveryProblems returns the problems of the mode and its settings:
// transactions, acks and the limits on records and transactions.
func (c *Config) deliveryProblems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if c.Mode > Plain {
		add("Mode %d is unknown: use ExactlyOnce, Idempotent or Plain", c.Mode)
	}
	if c.Mode == ExactlyOnce {
		if c.TransactionTimeout < time.Second || c.TransactionTimeout > 15*time.Minute {
			add("TransactionTimeout %v: want between 1s and the broker's transaction.max.timeout.ms (15m by default)", c.TransactionTimeout)
		}
		if c.CommitTimeout <= 0 || c.CommitTimeout >= c.TransactionTimeout {
			add("CommitTimeout %v must be positive and below TransactionTimeout %v, so a commit never outlives its transaction", c.CommitTimeout, c.TransactionTimeout)
		}
	} else if c.TransactionalID != "kafkasink-"+c.SinkID {
		add("TransactionalID is set but Mode is %s: transactional ids are only used in ExactlyOnce mode", c.Mode)
	}
	if c.Mode != Plain && c.Acks != AcksAll {
		add("Acks must be AcksAll in %s mode; only Plain mode may lower it", c.Mode)
	}
	if c.Acks > AcksNone {
		add("Acks %d is unknown", c.Acks)
	}
	if c.MaxTransactionRecords < 1 {
		add("MaxTransactionRecords %d: want at least 1", c.MaxTransactionRecords)
	}
	if c.MaxTransactionBytes < c.MaxRecordBytes {
		add("MaxTransactionBytes %d is below MaxRecordBytes %d: a single record could not fit a transaction", c.MaxTransactionBytes, c.MaxRecordBytes)
	}
	if c.MaxRecordBytes < 1024 {
		add("MaxRecordBytes %d: want at least 1024", c.MaxRecordBytes)
	}
	return p
}

// ownTxnDeadline is how long the sink lets one of its transactions run: a
// tenth below TransactionTimeout, so that neither producing nor the commit
// request runs into the broker's own abort.
func (c *Config) ownTxnDeadline() time.Duration {
	return c.TransactionTimeout - c.TransactionTimeout/10
}
