package pgcdc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/backoff"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	DefaultSnapshotChunkRows = 10000
	DefaultSnapshotWorkers   = 1
	DefaultBatchMaxEvents    = 40000 // the sink's DefaultMaxTransactionRecords: a full batch is one transaction
	DefaultBatchMaxBytes     = 16 << 20
	DefaultStandbyInterval   = 10 * time.Second
	DefaultHeartbeatInterval = 30 * time.Second
	DefaultReconnectBackoff  = 500 * time.Millisecond
	DefaultReconnectMax      = 30 * time.Second
	DefaultRetainedWALWarn   = 1 << 30
	DefaultSpoolMaxBytes     = pgoutput.DefaultSpoolMaxBytes
)

// Config configures Run. Run copies it; later changes have no effect. The
// zero value of every field but ConnString, Slot and Publication is a
// usable default.
type Config struct {
	// ConnString is how to reach the database, as a postgres:// URL or a
	// keyword/value string, exactly as for pgx. Required. Run opens
	// ordinary connections with it (setup, snapshot, heartbeats) and
	// replication connections with replication=database added, so the
	// role needs the REPLICATION attribute (or rds_replication and the
	// like on managed services), and pg_hba.conf must admit replication
	// connections to the database. Every connection sends the output
	// settings the value conversions assume (DateStyle, IntervalStyle,
	// TimeZone, extra_float_digits, bytea_output, lc_monetary,
	// client_encoding; see the package documentation) as startup
	// parameters, replacing any the string gives. A connection pooler in
	// between must pass them to the server: PgBouncer refuses the ones it
	// does not track (see its track_extra_parameters), and
	// ignore_startup_parameters would drop them, so connect directly or
	// have it track them all.
	ConnString string
	// ConfigureConn, when set, is called before every connection Run
	// opens, ordinary and replication ones, with the configuration parsed
	// from ConnString, for what a connection string cannot say: a TLS
	// configuration built in code (client certificates that rotate), a
	// dialer, a password fetched for each connection (a cloud IAM token,
	// a rotated secret). c.RuntimeParams["replication"] is "database" on
	// a replication connection. Run sets its own runtime parameters again
	// after it (replication, application_name when unset, and the output
	// settings), so it cannot change those. An error it returns fails
	// that attempt, which Run retries with backoff like a refused
	// connection.
	ConfigureConn func(ctx context.Context, c *pgconn.Config) error

	// Slot is the logical replication slot (plugin pgoutput). Required;
	// lower-case letters, digits and underscores, at most 63 bytes, as
	// PostgreSQL demands.
	Slot string
	// CreateSlot, when true, creates the slot if it does not exist. When
	// false a missing slot is a fatal error. A slot is only ever created
	// before streaming starts: a slot dropped while Run streams is a fatal
	// error, because changes were lost with it. When the sink's checkpoint
	// is not zero, a missing slot is a gap, handled as SlotGap says.
	CreateSlot bool

	// Publication names the publication the slot streams. Required; at
	// most 63 bytes.
	Publication string
	// CreatePublication, when true, creates the publication if it does not
	// exist, for Tables (FOR ALL TABLES when Tables is empty, which needs a
	// superuser). When false a missing publication is a fatal error.
	CreatePublication bool
	// AcceptPublicationTables, when true, streams an existing publication
	// whose tables differ from Tables as it is, with a warning naming the
	// tables that differ. By default Run refuses it at start-up (a
	// *kafkasink.ConfigError naming them): the publication, not Tables,
	// decides what is streamed, and a difference is usually a mistake
	// (a table added to Tables but not to the publication is never
	// delivered). Tables names a partitioned table by its root whether
	// the publication lists the root or its partitions. With Tables
	// empty nothing is compared.
	AcceptPublicationTables bool
	// Tables are the tables of a publication Run creates, as
	// "schema.table" ("table" alone means "public.table"). Names are
	// taken literally, as they are stored (Orders is not orders). A part
	// that contains a dot or a double quote, or starts or ends with a
	// space, is written in double quotes, with a double quote inside
	// doubled, as in SQL: public."a.b" or "a.b".c (see
	// kafkasink.ParseTableName); any part may be quoted. An unquoted name
	// with two dots, such as a.b.c, is refused as ambiguous.
	Tables []string

	// SchemaIncludeList, SchemaExcludeList, TableIncludeList,
	// TableExcludeList, ColumnIncludeList and ColumnExcludeList choose,
	// among what the publication publishes, the tables and columns Run
	// captures, with the rules of Debezium's schema.include.list, ...,
	// column.exclude.list: each item is a regular expression matching a
	// whole identifier, case-insensitively (a schema by its name, a table
	// as "schema.table", a column as "schema.table.column", names as
	// stored, unquoted). A table is captured when its schema passes the
	// schema lists and it passes the table lists; an include list admits
	// what one of its items matches, an exclude list what none matches,
	// and the two lists of a kind cannot both be set. Default: every
	// published table and column. A table left out is neither
	// snapshotted, backfilled nor streamed (its changes take no Position
	// index and count in no Event.Txn order); a column left out is absent
	// from the events' rows and Relation. A key column cannot be left
	// out (Debezium keeps it in the key only): Run stops with a
	// *kafkasink.ConfigError naming it. The lists filter what is
	// delivered, not what the server decodes: a publication limited to
	// the captured tables (Tables) saves the server that work.
	// The program's flags are named after Debezium's properties
	// (-table.include.list, ...).
	SchemaIncludeList, SchemaExcludeList []string
	TableIncludeList, TableExcludeList   []string
	ColumnIncludeList, ColumnExcludeList []string

	// Snapshot, when true, delivers every row of the published tables as
	// an OpRead event before streaming changes, exactly as the publication
	// streams it (its column list and row filter applied): when Run
	// creates the slot (reading the snapshot the slot exports, so the
	// rows and the stream meet exactly), and when the sink has delivered
	// nothing yet (its checkpoint has no position and records no snapshot
	// run). Every table needs a primary
	// key or a replica identity index, unless KeylessTables; one without
	// is refused before the slot is created. A snapshot interrupted by a crash or an error
	// resumes at the chunk after its checkpointed cursor; see the package
	// documentation for what a resumed snapshot reads.
	Snapshot bool
	// SnapshotChunkRows is how many rows one snapshot chunk, and so one
	// Write, reads from a table. Default DefaultSnapshotChunkRows.
	SnapshotChunkRows int
	// SnapshotWorkers is how many connections read the snapshot at
	// once, each its own ranges of a table's key, several tables at once,
	// all in the one snapshot (see docs/snapshot.md). Each holds its own
	// connection beside Run's two; at most 2*SnapshotWorkers+2 chunks
	// of SnapshotChunkRows rows are in memory at once. 1 reads one
	// chunk after another on Run's own connection, but for a run that
	// several workers began, whose ranges one worker resumes. Default
	// DefaultSnapshotWorkers: on a machine of 2 cores the writer
	// (encoding and producing) bounds the rate, and more workers only
	// compete with it (see docs/snapshot.md for measurements).
	SnapshotWorkers int
	// snapshotChunkRead, when set (by tests), is called each time a
	// snapshot worker has read a chunk.
	snapshotChunkRead func()

	// Backfills, when set, lets the caller ask the running Run for
	// backfills: a table, or the rows of it a condition matches, read
	// again while the stream runs (see Backfills and docs/backfill.md).
	// Nil: no calls, but backfills asked for by signals, and those the
	// checkpoint holds unfinished, still run.
	Backfills *Backfills
	// BackfillChunkRows is how many rows one backfill chunk reads: the
	// stream waits for one chunk's query at a time. Default
	// DefaultBackfillChunkRows.
	BackfillChunkRows int
	// BackfillAddedTables, when true, backfills a table that joins the
	// publication while Run runs (ALTER PUBLICATION ... ADD TABLE, or a
	// table created under FOR ALL TABLES or FOR TABLES IN SCHEMA):
	// pgoutput streams its changes from then on, and its rows are read
	// as a backfill (BackfillStatus.By "added"), with the guarantees of
	// every backfill: each row at most one read event, none after a
	// newer change of its key. Run notices a table that joined at the
	// first change the stream carries of it, else within
	// StandbyInterval, when it reads the publication's tables again. The
	// checkpoint's cursor then records the publication's tables (their
	// names, with every Write), so a table that joined while Run was
	// stopped is backfilled when it starts; the first Run with the
	// option records them as they are. The tables the initial snapshot
	// reads are not backfilled. A table that Config.Tables does not name
	// is backfilled too, as the publication decides what is streamed,
	// with a warning (see AcceptPublicationTables). A table whose
	// backfill is refused (no key, see docs/backfill.md) is streamed
	// without it; the refusal is logged and in the Monitor.
	//
	// Default false: a table that joins is streamed from then on, and
	// its existing rows are not read (ask for them with Backfills or a
	// signal). Either way, a table that joins or leaves the publication
	// is logged and in the Monitor (RunStats.PublicationChanges); one
	// that leaves is no longer streamed, and its backfill is cancelled.
	// The program's flag is -backfill-added-tables, on by default there.
	BackfillAddedTables bool
	// SignalPrefix, when set, is the prefix of the logical decoding
	// messages Run takes as backfill signals, Debezium's signal JSON
	// sent with pg_logical_emit_message(true, prefix, json). Empty
	// (the default): no signals. It must differ from
	// "kafkasink.heartbeat", the heartbeats' prefix.
	SignalPrefix string
	// SignalTable, when set, names Debezium's signal table, as its
	// signal.data.collection does ("schema.table", such as
	// "public.debezium_signal"; "table" alone means "public.table"):
	// rows inserted into it reach Run through the stream and are taken
	// as backfill signals, Debezium's id, type and data by position
	// (docs/backfill.md). The publication must stream the table with
	// exactly those three text columns; Run refuses to start otherwise.
	// Run never writes to it. Empty (the default): no signal table.
	SignalTable string
	// Outbox, when set, delivers the messages applications emit with
	// package outbox to their own topics (see Outbox, docs/outbox.md).
	// nil (the default): they are ignored.
	Outbox *Outbox
	// EventRouter, when set, routes the rows of outbox tables as
	// Debezium's outbox EventRouter does (see EventRouter). nil (the
	// default): outbox tables are tables like the others.
	EventRouter *EventRouter

	// BatchMaxEvents closes a batch at this many events. A transaction
	// with more events is split across Writes. Default
	// DefaultBatchMaxEvents.
	BatchMaxEvents int
	// BatchMaxBytes closes a batch when the memory its events hold
	// reaches it: the batch's slice of Events and each event's rows and
	// values, counted as the Go allocator rounds them, not the encoded
	// records. A batch holds less than BatchMaxBytes plus its last event,
	// and Run holds at most two batches (see "Batches and memory" in the
	// package documentation). Default DefaultBatchMaxBytes.
	BatchMaxBytes int
	// BatchMaxWait is how long a batch waits for more transactions
	// before it is written. Zero, the default, does not wait: a batch
	// goes to Kafka as soon as the previous Write returned, so an idle
	// loop writes each transaction at once, and a busy one gathers into
	// the next batch whatever arrives during a Write. A positive value
	// trades latency for fewer, larger Kafka transactions at low load.
	BatchMaxWait time.Duration

	// StandbyInterval is how often the loop reports its confirmed
	// position to the server, whether or not it was asked; it also answers
	// every keepalive that requests a reply at once. It must stay well
	// below the server's wal_sender_timeout (60s by default). Default
	// DefaultStandbyInterval.
	StandbyInterval time.Duration

	// HeartbeatInterval is how often Run writes a logical decoding
	// message (pg_logical_emit_message, prefix "kafkasink.heartbeat")
	// on an ordinary connection, so that a database whose published
	// tables are idle still moves WAL through the slot and the slot's
	// confirmed position advances instead of holding WAL on disk.
	// Default DefaultHeartbeatInterval; a negative value disables
	// heartbeats. Heartbeats are only seen through the slot on
	// PostgreSQL 14 and later, and not written while the server is a
	// standby, which is read-only.
	//
	// It is also the pace of two other things: the slot's position is
	// confirmed without a change to deliver (heartbeats, keepalives,
	// changes of unpublished tables) at most once per interval, each
	// time after a Write of the cursor alone that records it (see
	// SlotGap); and the WAL the slot retains is measured (see
	// RetainedWALWarn). With heartbeats disabled both use
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration

	// NoFailoverSlot, when true, leaves the slot as it is. By default,
	// on a PostgreSQL 17 or later primary, Run makes the slot a failover
	// slot (failover = true, ALTER_REPLICATION_SLOT ... (FAILOVER true)
	// for one that exists), which a standby with sync_replication_slots
	// = on keeps a copy of, so that after a failover to it Run resumes
	// from that copy (see docs/postgresql-failover.md). A slot on a
	// standby, or before 17, is never a failover slot. The program's
	// flag is -failover-slot (on by default).
	NoFailoverSlot bool
	// FailoverStandby, when set, is the connection string of a standby
	// of the primary Run reads (PostgreSQL 17+), on which Run checks the
	// settings failover slots need (sync_replication_slots,
	// hot_standby_feedback, primary_slot_name listed in the primary's
	// synchronized_standby_slots) at start-up, and reads, every
	// StandbyInterval, whether it holds a synchronised copy of the slot
	// (pg_replication_slots.synced, only visible there): Monitor reports
	// it (RunStats.StandbySync), so an operator knows whether a failover
	// now would be safe. Run never writes there. Empty, the default:
	// nothing is read from a standby. The program's flag is
	// -failover-standby.
	FailoverStandby string

	// SlotGap says what Run does at start-up when the slot cannot
	// continue where the sink's checkpoint left off: the slot is
	// missing, invalidated, or was moved beyond what Run confirmed. The
	// default, SlotGapRefuse, returns a *SourceError before anything is
	// written; see SlotGap for the ways out. A gap that opens while Run
	// streams always stops it (ErrSlotLost or a *SourceError); started
	// again, Run applies SlotGap.
	SlotGap SlotGap

	// OnSourceEvent, when set, is called for every SourceEvent: a gap
	// refused or gone across, a slot lost, a checkpoint of another
	// source, a timeline change, WAL retained above RetainedWALWarn.
	// Each is also logged. It is called on Run's goroutines, which may
	// overlap: it must be fast and safe for concurrent use.
	OnSourceEvent func(SourceEvent)

	// RetainedWALWarn is the WAL the slot may hold back (the server's
	// current WAL position minus the slot's restart_lsn) before Run
	// logs a warning and reports SourceWALRetained. Run measures it every
	// HeartbeatInterval and logs it once a minute. Default
	// DefaultRetainedWALWarn (1 GiB); a negative value disables the
	// warning, not the measurement. The server's max_slot_wal_keep_size
	// is what bounds it: past that the slot is invalidated.
	RetainedWALWarn int64

	// ReconnectBackoff is the first wait before reconnecting after a
	// retryable error (connection loss, server restart, a terminated
	// walsender, a retryable Write error); it doubles after each failed
	// attempt up to ReconnectMax and starts over once streaming runs
	// again. Defaults DefaultReconnectBackoff and DefaultReconnectMax;
	// ReconnectBackoff may not exceed ReconnectMax.
	ReconnectBackoff time.Duration
	// ReconnectMax is the longest wait between reconnects, and between
	// the retries of a Write. Default DefaultReconnectMax.
	ReconnectMax time.Duration

	// KeyColumns names the key columns of tables, as the sink's
	// kafkasink.Config.KeyColumns does (see kafkasink.TableKeys); see
	// DecoderConfig.KeyColumns. A table it does not name is
	// keyed by its replica identity columns (DEFAULT: the primary key;
	// USING INDEX: the index's columns), and a table whose identity names
	// no row (FULL, NOTHING) by its primary key from the catalog. A table
	// with neither is keyed by event id, which is logged once per table,
	// or has a null key (see KeylessTables).
	// Key columns found by these rules are in their index's order
	// (PRIMARY KEY (b, a): b, then a); KeyColumns keeps its own order.
	// Snapshot rows use the same rules, so snapshot and stream events of a
	// table have the same Key. The program's flag is -key-columns.
	KeyColumns kafkasink.TableKeys

	// KeylessTables accepts tables without a key the way Debezium does.
	// A table is keyless when KeyColumns has no answer for it and it has
	// no replica identity index (REPLICA IDENTITY FULL, NOTHING, or
	// DEFAULT without a primary key) and no published primary key. With
	// KeylessTables its events are kafkasink.Event.Keyless: the sink
	// writes them with a null Kafka key, to partition 0 of their topic
	// (one partition, so the table's changes keep commit order), and
	// Snapshot reads such tables too, in chunks of pages (by ctid) inside
	// its one transaction. Without it (the default) their changes are
	// keyed by event id, and Snapshot refuses them.
	//
	// It is an opt-in because a compacted topic refuses records with a
	// null key (the sink rejects such events, reason no_key, and
	// dead-letters them or fails the Write; give such a table KeyColumns
	// there), because it changes
	// the keys and partitions existing pipelines write, and because the
	// snapshot can read a keyless table only from the snapshot the slot
	// exports as Run creates it: a run that resumes after an interruption,
	// or that starts on a slot that already exists, with such a table
	// still to read stops Run with a *kafkasink.ConfigError naming the
	// tables and the ways out, before it writes a row (see the package
	// documentation). The program's flag is -keyless-tables.
	KeylessTables bool

	// SpoolDir holds the temporary files of streamed transactions; see
	// DecoderConfig.SpoolDir. Default os.TempDir(). Each Run keeps them
	// in a directory of its own in it, named after the source and locked
	// while Run lives (kafkasink-pgcdc-<slot>-<system id>-<database
	// oid>.<random>), and removes it when it returns. At start it removes
	// the directories of the same source whose owner is gone (killed
	// before it could), never those of a live process; on systems
	// without flock it leaves them alone.
	SpoolDir string
	// SpoolMaxBytes bounds the bytes the spool holds at once (see
	// DecoderConfig.SpoolMaxBytes): a streamed transaction that would pass
	// it stops Run with a *kafkasink.ConfigError naming it, before it
	// fills the disk. Zero means DefaultSpoolMaxBytes (16 GiB); negative,
	// no bound but the disk's.
	SpoolMaxBytes int64

	// Monitor, when set, is where Run reports its state, reconnects and
	// positions while it runs (see Monitor); read it with Monitor.Stats.
	Monitor *Monitor

	// Logger receives what Run does: connections, reconnects with their
	// reason, slot and snapshot progress. Nil discards.
	Logger *slog.Logger
}

// withDefaults returns cfg with zero values replaced by defaults.
func (cfg Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.RetainedWALWarn == 0 {
		cfg.RetainedWALWarn = DefaultRetainedWALWarn
	}
	def(&cfg.SnapshotChunkRows, DefaultSnapshotChunkRows)
	def(&cfg.SnapshotWorkers, DefaultSnapshotWorkers)
	def(&cfg.BackfillChunkRows, DefaultBackfillChunkRows)
	def(&cfg.BatchMaxEvents, DefaultBatchMaxEvents)
	def(&cfg.BatchMaxBytes, DefaultBatchMaxBytes)
	defDur(&cfg.StandbyInterval, DefaultStandbyInterval)
	defDur(&cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	defDur(&cfg.ReconnectBackoff, DefaultReconnectBackoff)
	defDur(&cfg.ReconnectMax, DefaultReconnectMax)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Tables = append([]string(nil), cfg.Tables...)
	return cfg
}

// Validate checks cfg as Run does before it connects: it returns every
// problem at once as one *kafkasink.ConfigError, or nil. A program calls
// it to report configuration errors before it waits for anything (such as
// the lease) or connects anywhere.
func (cfg Config) Validate() error {
	cfg = cfg.withDefaults()
	return cfg.validate()
}

// validate checks cfg after withDefaults and returns every problem as one
// *kafkasink.ConfigError.
func (cfg *Config) validate() error {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, "pgcdc: "+fmt.Sprintf(format, args...))
	}
	problems = append(problems, cfg.KeyColumns.Check("pgcdc: Config.KeyColumns")...)
	if cfg.ConnString == "" {
		add("Config.ConnString is required: a postgres:// URL or keyword/value string")
	} else if _, err := pgconn.ParseConfig(cfg.ConnString); err != nil {
		// pgconn's parse error redacts the password.
		add("Config.ConnString does not parse: %v", err)
	}
	if cfg.FailoverStandby != "" {
		if _, err := pgconn.ParseConfig(cfg.FailoverStandby); err != nil {
			add("Config.FailoverStandby does not parse: %v", err)
		}
	}
	switch {
	case cfg.Slot == "":
		add("Config.Slot is required")
	case !validSlotName(cfg.Slot):
		add("Config.Slot %q is not a valid replication slot name: use lower-case letters, digits and underscores, at most 63 bytes", cfg.Slot)
	}
	switch {
	case cfg.Publication == "":
		add("Config.Publication is required")
	case len(cfg.Publication) > 63:
		add("Config.Publication %q is longer than 63 bytes", cfg.Publication)
	}
	for _, t := range cfg.Tables {
		if _, _, err := splitTable(t); err != nil {
			add("Config.Tables: %v", err)
		}
	}
	_, filterProblems := newCaptureFilter(cfg)
	problems = append(problems, filterProblems...)
	for _, f := range []struct {
		name string
		v    int
	}{{"SnapshotChunkRows", cfg.SnapshotChunkRows}, {"SnapshotWorkers", cfg.SnapshotWorkers}, {"BackfillChunkRows", cfg.BackfillChunkRows}, {"BatchMaxEvents", cfg.BatchMaxEvents}, {"BatchMaxBytes", cfg.BatchMaxBytes}} {
		if f.v < 0 {
			add("Config.%s %d is negative: use 0 for the default", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"BatchMaxWait", cfg.BatchMaxWait}, {"StandbyInterval", cfg.StandbyInterval}, {"ReconnectBackoff", cfg.ReconnectBackoff}, {"ReconnectMax", cfg.ReconnectMax}} {
		if f.v < 0 {
			add("Config.%s %v is negative: use 0 for the default", f.name, f.v)
		}
	}
	if cfg.SignalTable != "" {
		if _, _, err := splitTable(cfg.SignalTable); err != nil {
			add("Config.SignalTable: %v", err)
		}
	}
	if cfg.SignalPrefix == heartbeatPrefix {
		add("Config.SignalPrefix %q is the heartbeats' prefix: choose another, such as \"kafkasink.signal\"", cfg.SignalPrefix)
	}
	if cfg.EventRouter != nil {
		_, problems := cfg.EventRouter.prepare()
		for _, p := range problems {
			add("%s", p)
		}
		if cfg.Snapshot {
			add("Config.EventRouter and Config.Snapshot are both set: the snapshot would write the outbox tables' rows unrouted; " +
				"leave the outbox tables out of a snapshot, or turn it off")
		}
	}
	if cfg.Outbox != nil {
		for _, p := range cfg.Outbox.problems(cfg.SignalPrefix) {
			add("%s", p)
		}
	}
	if cfg.SlotGap < SlotGapRefuse || cfg.SlotGap > SlotGapAccept {
		add("Config.SlotGap %d is not a SlotGap: use SlotGapRefuse, SlotGapResnapshot or SlotGapAccept", int(cfg.SlotGap))
	}
	if cfg.ReconnectBackoff > 0 && cfg.ReconnectMax > 0 && cfg.ReconnectBackoff > cfg.ReconnectMax {
		add("Config.ReconnectBackoff %v exceeds Config.ReconnectMax %v", cfg.ReconnectBackoff, cfg.ReconnectMax)
	}
	if problems != nil {
		return &kafkasink.ConfigError{Problems: problems}
	}
	return nil
}

// validSlotName applies PostgreSQL's rule for replication slot names, so
// a bad name is refused before any connection and the name can go into
// replication commands unquoted.
func validSlotName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// splitTable splits a name of Config.Tables into schema and table, as
// kafkasink.ParseTableName reads it; a name without a schema is in public.
func splitTable(s string) (schema, table string, err error) {
	schema, table, err = kafkasink.ParseTableName(s)
	if err != nil {
		return "", "", err
	}
	if schema == "" {
		schema = "public"
	}
	return schema, table, nil
}

// qualified returns schema.table quoted for SQL.
func qualified(schema, table string) string {
	return pgx.Identifier{schema, table}.Sanitize()
}

// outputSettings are the session settings under which the server prints
// values the way the conversions in values.go parse them. Each one, left
// to a role's or a database's taste, changes what reaches Kafka:
// extra_float_digits below 1 rounds floats (0.30000000000000004 becomes
// 0.3); a DateStyle other than ISO prints dates the parsers refuse; an
// IntervalStyle other than postgres, or an lc_monetary other than C,
// changes the text of intervals and money; a client_encoding other than
// UTF8 turns text into invalid UTF-8; TimeZone and bytea_output only change
// the form of values the parsers read either way, and are pinned so that
// every connection prints alike.
var outputSettings = [...]struct{ name, value string }{
	{"client_encoding", "UTF8"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"TimeZone", "UTC"},
	{"extra_float_digits", "3"},
	{"bytea_output", "hex"},
	{"lc_monetary", "C"},
}

// pinOutputSettings puts outputSettings into a connection's startup
// parameters. A setting sent at start-up takes precedence over ALTER ROLE
// and ALTER DATABASE settings and over -c options in the connection
// string, so no configuration can change what reaches Kafka. Setting
// names are case-insensitive to the server, so any spelling of them in the
// connection string is dropped first: two spellings would both be sent,
// in map order, and either could win.
func pinOutputSettings(params map[string]string) {
	for k := range params {
		for _, s := range outputSettings {
			if strings.EqualFold(k, s.name) {
				delete(params, k)
			}
		}
	}
	for _, s := range outputSettings {
		params[s.name] = s.value
	}
}

// connConfig returns the configuration of an ordinary connection. A
// replication parameter in ConnString is dropped: ordinary queries use the
// extended protocol, which replication connections refuse.
func (cfg *Config) connConfig(ctx context.Context) (*pgx.ConnConfig, error) {
	c, err := pgx.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, err
	}
	if err := cfg.configure(ctx, &c.Config, ""); err != nil {
		return nil, err
	}
	return c, nil
}

// replicationConfig returns the configuration of a replication connection:
// ConnString with replication=database, which allows both replication
// commands and simple SQL queries in the database.
func (cfg *Config) replicationConfig(ctx context.Context) (*pgconn.Config, error) {
	c, err := pgconn.ParseConfig(cfg.ConnString)
	if err != nil {
		return nil, err
	}
	if err := cfg.configure(ctx, c, "database"); err != nil {
		return nil, err
	}
	return c, nil
}

// configure sets the runtime parameters Run depends on: replication (""
// for an ordinary connection), a default application_name, and the output
// settings; and when there is a ConfigureConn, it runs it on c, which then
// shows what kind of connection it is, and sets them again.
func (cfg *Config) configure(ctx context.Context, c *pgconn.Config, replication string) error {
	pin := func() {
		if replication == "" {
			delete(c.RuntimeParams, "replication")
		} else {
			c.RuntimeParams["replication"] = replication
		}
		if c.RuntimeParams["application_name"] == "" {
			c.RuntimeParams["application_name"] = "kafkasink-pgcdc"
		}
		pinOutputSettings(c.RuntimeParams)
	}
	pin()
	if cfg.ConfigureConn != nil {
		if err := cfg.ConfigureConn(ctx, c); err != nil {
			return fmt.Errorf("pgcdc: Config.ConfigureConn: %w", err)
		}
		pin()
	}
	return nil
}

// connect opens an ordinary connection; purpose completes the error
// ("pgcdc: <purpose>: ..."), to say which of Run's connections failed.
func (cfg *Config) connect(ctx context.Context, purpose string) (*pgx.Conn, error) {
	cc, err := cfg.connConfig(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: %s: %w", purpose, err)
	}
	return conn, nil
}

// connectReplication opens a replication connection.
func (cfg *Config) connectReplication(ctx context.Context) (*pgconn.PgConn, error) {
	rc, err := cfg.replicationConfig(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: replication connection: %w", err)
	}
	return conn, nil
}

// tick is the interval of what Run does at the heartbeat's pace:
// HeartbeatInterval, or its default when heartbeats are disabled.
func (cfg *Config) tick() time.Duration {
	if cfg.HeartbeatInterval > 0 {
		return cfg.HeartbeatInterval
	}
	return DefaultHeartbeatInterval
}

// backoff is the wait between attempts of Run's reconnect loop and of a
// retried Write: ReconnectBackoff, doubling up to ReconnectMax.
func (cfg *Config) backoff() *backoff.Backoff {
	return backoff.New(cfg.ReconnectBackoff, cfg.ReconnectMax)
}
