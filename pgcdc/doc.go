// Package pgcdc connects PostgreSQL logical replication to a kafkasink.Sink.
//
// # Running the pipeline
//
// Run is the whole pipeline: give it a Config and a sink, and it streams
// until its context ends or a fatal error occurs.
//
//	err := pgcdc.Run(ctx, pgcdc.Config{
//		ConnString:        "postgres://cdc:secret@db:5432/shop",
//		Slot:              "kafkasink",
//		Publication:       "kafkasink",
//		Tables:            []string{"public.orders", "public.customers"},
//		CreateSlot:        true,
//		CreatePublication: true,
//		Snapshot:          true,
//	}, sink)
//
// At start Run checks that wal_level is logical, creates the publication
// when allowed (an existing one must publish exactly Config.Tables, when
// set, unless Config.AcceptPublicationTables), checks that the slot continues the sink's checkpoint from
// the same source (see "Gaps at the source"), creates the slot when
// allowed (and refuses, naming the fix, when it is missing and not),
// takes or resumes the initial snapshot, and starts replication from the
// later of the slot's confirmed_flush_lsn and the sink's checkpoint. It
// uses pgoutput protocol version 2 with streamed
// in-progress transactions and logical decoding messages on PostgreSQL 14
// and later, version 1 before.
//
// # Batches and confirmation
//
// Events are grouped into batches of whole transactions, closed by
// BatchMaxEvents or BatchMaxBytes; one batch is one sink.Write. A batch is
// written as soon as the previous Write returned (or once it has waited
// BatchMaxWait, when that is set): an idle loop writes each transaction at
// once, and a busy one gathers whatever arrives during a Write into the
// next batch, so batches grow with the load. A transaction larger than a batch is split across Writes: its
// Positions are (commit LSN, index), so after a failure the server sends it
// again and the sink skips the part its checkpoint covers.
//
// The flush LSN confirmed to the server, which lets it discard WAL and
// is where the slot restarts, is only ever the end of a transaction whose
// events, and all before it, a Write has returned nil for; never a point
// inside a split transaction. Between transactions, when everything
// received is written, the LSN of a keepalive or of a heartbeat is
// confirmed too, so the slot of an idle or filtered database advances.
// Heartbeats are logical decoding messages with the prefix
// "kafkasink.heartbeat", written every HeartbeatInterval on an ordinary
// connection.
//
// Reading the connection, deciding what to confirm, and writing run in
// separate goroutines, so the loop answers keepalives and sends standby
// status every StandbyInterval also while a Write is in progress, and the
// server's wal_sender_timeout does not end the connection of a slow sink.
//
// # Batches and memory
//
// At most two batches are in memory: the one sink.Write is writing and
// the one the loop fills. While a full batch waits for the writer, the
// loop stops reading and TCP flow control holds the server back. A batch
// is full once the memory its events hold (the slice of Events, their
// rows and values, as the Go allocator rounds them) reaches
// BatchMaxBytes, so the two hold less than 2 x BatchMaxBytes plus two
// events. The batches' slices are not reused: a Sink may keep the events
// it was given (kafkasinktest.Recorder does). Beyond them the pipeline
// holds the sink's encoding of the batch being written (its records,
// headers, keys and values, which kafkasink keeps for the next Write:
// for rows of a few hundred bytes about as large as the batch), the
// messages read but not yet decoded (up to 8 MiB: the 4 MiB waiting and
// the 4 MiB the loop is decoding), and the relation and type caches.
// Streamed transactions wait on disk (SpoolDir), not in memory.
//
// # Tables and topics
//
// Config.Tables, and the keys of the sink's Topics.Routes, name tables as
// "schema.table", taken literally (Orders is not orders). A part that holds
// a dot or a double quote, or starts or ends with a space, is written in
// double quotes as in SQL, a quote inside doubled: public."a.b" and
// "a.b".c are two tables, and an unquoted a.b.c is refused as ambiguous
// (see kafkasink.ParseTableName).
//
// The sink names each table's topic (kafkasink.Topics): by default
// "<prefix>.<schema>.<table>", with the schema and table names put in
// verbatim, in the case PostgreSQL stores them. Nothing is escaped,
// lowered or replaced. A name that makes an invalid Kafka topic name (a
// character outside [a-zA-Z0-9._-], such as a space, a quote or a non-ASCII
// letter, or more than 249 bytes) is unroutable: each of the table's events
// is rejected (kafkasink.ReasonUnroutable) until a Topics.Routes entry names
// its topic, such as {`public."Order Items"`: "shop.order_items"}. Two
// tables that reach the same topic ("a.b".c and a."b.c" both make
// <prefix>.a.b.c) stop Run with a fatal *kafkasink.ConfigError naming
// both, unless both reach it through Topics.Routes entries or the topic is
// in Topics.Shared.
//
// A rejected event (unroutable, unencodable, no key, too large) goes to the
// sink's dead-letter topic when it has one, with its key and value (or the
// event as JSON when the encoder failed) and headers naming the reason, and
// the slot moves past it. Without one, Run stops with the
// *kafkasink.RejectedError and confirms nothing past the event: the same
// event stops the next Run until the cause is fixed. A row too large for
// its topic by the lengths of its values alone is rejected before it is
// encoded. The row itself is still decoded in full: a 100 MB value takes a
// few times its size in memory while it passes through.
//
// # Gaps at the source
//
// Exactly once into Kafka means nothing if changes never leave PostgreSQL.
// Every Write carries, in its Batch.Cursor, what Run knows about the
// source, so the checkpoint records it:
//
//	{"cursor_version":1,
//	 "source":{"system_id":"7301...","timeline":1,"database":"shop","database_oid":16384,"slot":"kafkasink"},
//	 "confirmed_lsn":"0/1A2B3C4",
//	 "last_commit_end":"0/1A2B3C4",
//	 "gaps":[{"cause":"slot_missing","action":"accept","from":"0/1528000","to":"0/1529A10","wal_bytes":6672,"at":"..."}],
//	 ...the snapshot's fields, when there was a snapshot run}
//
// The source is the system identifier (IDENTIFY_SYSTEM), the timeline,
// the database's name and oid, and the slot's name. confirmed_lsn is the
// highest position Run confirmed to the slot, recorded before it is
// confirmed: positions without an event to deliver (keepalives,
// heartbeats, changes of unpublished tables) are confirmed at most once
// per HeartbeatInterval, each time after a Write of the cursor alone. On a
// busy database the cursor rides on the Writes of events and costs no
// extra Write. last_commit_end is the end of the commit record of the last
// transaction written: the Event.Source.PrevCommitEnd (Debezium's
// source.sequence[0]) of the first transaction streamed after a reconnect
// or a restart. gaps is the audit list of the gaps gone across, the newest
// 32 kept.
//
// At start-up, before anything is created or written, Run refuses to go
// on, with a *SourceError that names what differs or what would be
// skipped, the positions and the WAL bytes in between, and the ways out:
//
//   - a checkpoint of another source: another system identifier (another
//     server, a rebuilt cluster), another database (or the same name with
//     another oid), another slot name. The timeline alone may change (a
//     promoted standby): see Timelines below. The ways out are a
//     sink id of its own for this source, or deleting the sink's checkpoint
//     with a tombstone in the checkpoint topic.
//   - a slot missing while the checkpoint is not zero: it was dropped, or
//     Slot or ConnString name a new slot or database. No slot is created:
//     the error names the current WAL position, where a new slot would
//     begin at the earliest.
//   - a slot invalidated: wal_status = 'lost' (the server removed WAL it
//     needed, past max_slot_wal_keep_size), or conflicting on a standby
//     (PostgreSQL 16 and later).
//   - a slot whose confirmed_flush_lsn is beyond confirmed_lsn: someone ran
//     pg_replication_slot_advance, or another program consumed the slot.
//
// For the last three Config.SlotGap chooses the way out: SlotGapRefuse
// (the default), SlotGapResnapshot (every published table is read again,
// from the snapshot the new slot exports, or from the current state when
// the slot exists, then the stream goes on; the run is finished whatever
// Snapshot says), or SlotGapAccept (the stream goes on). Either is logged,
// reported to Config.OnSourceEvent, and recorded in the cursor's gaps
// before anything after the gap is written. An invalidated slot is dropped
// and created again, which needs CreateSlot. A new slot that begins at or
// before the checkpoint (a restored backup) is dropped again and refused
// whatever SlotGap says. A gap that opens while Run streams (the slot
// dropped or invalidated under it) stops Run with ErrSlotLost or a
// *SourceError; started again, Run applies SlotGap.
//
// A checkpoint of an earlier version, without a source, is adopted: the
// source and the slot's confirmed position are recorded from then on. For
// it, a missing or invalidated slot is still refused; a slot moved beyond
// the checkpoint before the upgrade is not detected.
//
// # Timelines
//
// The cursor records the timeline of its source. At every connection,
// when the server is on another timeline (a standby was promoted), Run
// reads the server's timeline history (TIMELINE_HISTORY) and places the
// checkpoint on it. A checkpoint on an ancestor timeline, before the
// switchpoint where the history left it, is on the server: Run reports
// SourceTimelineChanged and goes on; so it does when the slot on the
// server confirmed exactly what the cursor recorded last, since then Run
// streamed on through the server's own promotion (decoding on a standby).
// Otherwise Kafka holds changes the server never had (an asynchronous
// standby was promoted before it received them): Run refuses with a
// *SourceError of kind SourceTimelineDiverged that names the timelines,
// the switchpoint, the range and the last transaction, and Config.SlotGap
// chooses the way out as for the gaps above: SlotGapResnapshot creates
// the slot again and reads every published table from its snapshot,
// SlotGapAccept streams on after the checkpoint. The diverged records
// stay in Kafka either way. See TimelineChange and docs/pgcdc.md.
//
// Not detected: changes lost inside PostgreSQL that leave the timeline as
// it was (a backup copied back as files and started without archive
// recovery, its slot with it), two servers promoted to the same timeline
// (split brain), a slot moved by someone else to a position no
// further than Run had confirmed, and changes to tables outside the
// publication or published with a row filter or column list that drops
// them.
//
// # WAL retained by the slot
//
// A slot holds back WAL from its restart_lsn on until Run confirms. Run
// measures it (the current WAL position minus restart_lsn) every
// HeartbeatInterval, logs it once a minute, and above
// Config.RetainedWALWarn (1 GiB by default) logs a warning and reports a
// SourceWALRetained event. The server's max_slot_wal_keep_size bounds it:
// past that, at a checkpoint, the server invalidates the slot
// (wal_status becomes 'lost') and the changes it held are gone, which Run
// reports as above. The default, -1, keeps WAL without limit, until the
// disk is full; set it to what the disk can hold and what a sink outage
// may last, and keep RetainedWALWarn well below it.
//
// # Errors and reconnects
//
// Lost connections, a restarted server, a terminated walsender and similar
// errors make Run reconnect with exponential backoff (ReconnectBackoff up to
// ReconnectMax) and start over from the slot and the checkpoint, with the
// decoder reset; a retryable Write error makes it write the same batch
// again. Fatal errors end Run: an invalid Config or server setup
// (*kafkasink.ConfigError, also from a Write whose tables collide on a
// topic), a *DecodeError, ErrSlotLost, a *SourceError, and Write errors
// that kafkasink.IsRetryable rejects, such as a *kafkasink.RejectedError.
// When ctx ends, Run waits for the Write in progress, which sees the
// cancelled context and commits or aborts as a whole, and returns
// context.Cause(ctx).
//
// # High availability
//
// Run must be the only writer of its sink, and a slot streams to one
// walsender at a time; yet two replicas of a program started with the
// same configuration would both call kafkasink.New, which claims the
// sink's transactional id and fences whichever instance held it, so they
// would stop each other in turn. AcquireLease orders them: call it before
// kafkasink.New, and stop (cancel Run's context) when the Lease's Lost
// channel closes; ExampleAcquireLease shows how. The program
// cmd/kafkasink does it with -ha, on by default.
//
// The lease is a session-level advisory lock, pg_advisory_lock(LeaseKey(slot)),
// in the database the connection string names, held on a connection of its
// own. A process that does not hold it waits in AcquireLease, logging who
// does (application name, backend pid, client address and port: set
// LeaseConfig.Holder to tell replicas apart); it needs no privilege beyond
// connecting. The holder renews it with SELECT 1 every Timeout/4, and its
// session runs with idle_session_timeout = Timeout (PostgreSQL 14 and
// later; AcquireLease refuses older servers), TCP keepalives and
// tcp_user_timeout, so the lock is freed when the holder:
//
//   - exits or is killed: the server sees the connection close, at once;
//   - is frozen (SIGSTOP, a long pause) or cut off from the database: the
//     server ends its idle session Timeout after its last renewal.
//
// The holder reports the lease lost (Lost closes, Err wraps ErrLeaseLost)
// when a renewal fails, and, as soon as it runs again, when its last
// renewal is Timeout old: a process resumed after SIGCONT stops before it
// asks anything. A holder that goes on writing regardless is stopped by
// the sink's fencing: the next holder's kafkasink.New fenced it, so it
// commits nothing.
//
// A frozen holder's walsender still holds the slot until the server's
// wal_sender_timeout (60s by default) ends it, so the new holder
// terminates it (pg_terminate_backend) as it takes the lease, and Run
// starts at once instead of retrying for a minute. That needs the
// walsender's role (replicas with the same configuration have it) or
// membership in pg_signal_backend; without it AcquireLease logs a warning
// naming the fix, and Run retries until wal_sender_timeout frees the slot.
//
// Takeover, measured on one machine with PostgreSQL 15 and Kafka 4.4
// (the program's TestHighAvailabilityTakeover, from the signal to the
// first change made after it in Kafka): after the active replica's
// SIGKILL the standby delivers within 0.06s to 0.14s; after a SIGSTOP,
// within the lease's Timeout, which counts from the last renewal (up to
// Timeout/4 before the stop), plus about 0.1s: 2.4s to 3.1s with a Timeout
// of 3s. Give Lease.Check to the sink as kafkasink.Config.Guard: a
// replica resumed after a freeze then sends nothing more under the
// transactional id (on Kafka 4.4 its recovery could abort the new
// holder's open transaction).
//
// # Standbys and failovers
//
// On PostgreSQL 16 and later, ConnString may name a hot standby: Run
// creates or uses its slot there, reads the initial snapshot the slot
// exports there, and goes on when that standby is promoted. It refuses a
// standby before 16, and one with hot_standby_feedback off, with a
// *kafkasink.ConfigError. On a PostgreSQL 17 or later primary the slot is
// a failover slot (Config.NoFailoverSlot), which a standby with
// sync_replication_slots keeps a copy of; with a ConnString that reaches
// the promoted standby after a failover (several hosts and
// target_session_attrs=read-write, or a name that moves), Run reconnects
// and resumes from the copy. Config.FailoverStandby lets the Monitor
// report whether the copy is synchronised (RunStats.StandbySync). The
// settings each server needs, and what each kind of failover does, are
// in docs/postgresql-failover.md.
//
// # Snapshot
//
// With Config.Snapshot, Run delivers every row of the published tables as
// an OpRead event before the stream, when it creates the slot and when the
// sink has delivered nothing yet. Tables are read in key order, in chunks
// of SnapshotChunkRows rows (keyset pagination), in one REPEATABLE READ
// transaction. Each chunk is one Write whose Batch.Cursor records the run,
// the consistent point, the table, the last key read (and its columns) and
// the finished tables, beside the fields of "Gaps at the source":
//
//	{...,"snapshot":"<run id>","lsn":"0/1A2B3C4","table":"public.orders","last_key":["1042"],"key_columns":["id"],"done_tables":["public.customers"]}
//
// The rows' Position is (the slot's consistent point, a counter that runs
// across chunks and tables), below every streamed transaction, and their
// Event.BackfillRunID is the run id.
//
// The snapshot reads exactly what the publication streams. Per table it
// reads the columns pgoutput sends (the publication's column list on
// PostgreSQL 15 and later, else every column; a generated column only
// where PostgreSQL 18 publishes it: publish_generated_columns = stored,
// or named in a column list)
// and only the rows the publication's row filter admits: the filter is
// applied in the snapshot's SELECT, inside each chunk. The tables are
// those pg_publication_tables lists, with PostgreSQL's own rules:
// partitions are read as themselves, with their own column list and row
// filter, unless the publication sets publish_via_partition_root, and then
// the root is read, with the root's; a table with inheritance children is
// read without them (each child is listed, and streamed, as itself); a
// table the publication reaches through FOR ALL TABLES or FOR TABLES IN
// SCHEMA has no row filter, even when the publication also names it with
// one. Only Config.Publication
// counts, the one publication the slot streams: another publication
// holding the same table changes nothing. Snapshot rows and streamed
// changes of a table carry the same Event.Key: the replica identity
// columns the publication publishes (as the Relation message flags them),
// or what Config.KeyColumns names, which must be published columns, or,
// for REPLICA IDENTITY FULL and NOTHING, the primary key when it is
// published (see Decoding).
//
// Chunks follow the primary key, or, for a table without one, its replica
// identity index (REPLICA IDENTITY USING INDEX); the key columns need not
// be published. Before the slot is created, and before any row is
// written, Run checks every published table and refuses, with a
// *kafkasink.ConfigError naming each table and the fixes, a table with
// neither: its rows could not be resumed after a crash without being lost
// or repeated. Give it a primary key or a replica identity index, leave it
// out of the publication, or turn the snapshot off; or set
// Config.KeylessTables to read it as Debezium does.
//
// With Config.KeylessTables such a table is read in ranges of pages
// (ctid >= '(p,0)' AND ctid < '(q,0)', a TID range scan on PostgreSQL 14
// and later, the whole table in one chunk before), each range one Write,
// sized from the table's statistics and the rows found per page to about
// SnapshotChunkRows rows; a partitioned table published through its root
// (publish_via_partition_root) is still refused, its partitions' pages
// having no common order. Such a table is read only from the snapshot the
// slot exports as Run creates it. Read later, as a resumed run or a run on
// an existing slot reads (see below), the rows changed since the slot's
// consistent point would be both read and streamed: a row inserted since
// twice, an updated one in both versions, a deleted one deleted without
// having been read, and without a key no consumer can tell the copies
// apart. Nor can such a table go on in its middle: a row's page is its
// place in the table, which a new transaction sees elsewhere for every row
// changed since (for all of them after VACUUM FULL or CLUSTER). So a
// snapshot run interrupted (a crash, a lost connection) while a keyless
// table is still to be read, in part or whole, and a snapshot of a slot
// that existed before it, stop Run with a *kafkasink.ConfigError naming
// the tables before it writes another row, whose ways out are a new snapshot
// into a new sink from a new slot, a primary key or replica identity
// index for the tables, or leaving them out of the publication. A run
// interrupted after its keyless tables were read resumes as any other.
//
// A fresh snapshot reads the snapshot the slot exported when it was created,
// so rows and stream meet exactly: every change after the consistent point
// comes from the slot, none twice. The exported snapshot does not survive
// the connection that created the slot, so a snapshot interrupted by a
// crash or an error resumes at the chunk after its checkpointed cursor in a
// new REPEATABLE READ transaction, reading the database as it is then. Rows
// changed after the consistent point may then be read in their newer state
// and are also streamed from the slot, whose confirmed position stays at
// the consistent point until the snapshot is complete; a consumer sees them
// converge to the latest state. The same holds for a snapshot of an existing
// slot for a sink that has delivered nothing.
//
// A publication changed while Run runs (ALTER PUBLICATION ... SET TABLE
// with another column list or row filter) applies to the changes committed
// after it; what is already in Kafka stays as it is. With a new column
// list, records written before keep the old columns, and so does a row's
// latest record until the row changes again; Run logs a warning naming the
// table and the old and new columns when the server describes the table
// with other columns (it says the same after ALTER TABLE). A new row filter
// is not announced by the server: rows it newly admits appear only when
// they next change, and rows it now excludes stay in the topic as they
// were, their later changes and deletes no longer streamed. The next
// snapshot follows the new definition: to bring the topic in line, take a
// new snapshot into a new sink (a new slot and sink id).
//
// # Decoding
//
// A Decoder turns pgoutput messages (protocol versions 1 and 2) into
// kafkasink.Events. It keeps the relation and type descriptions the server
// sends, delivers each committed transaction's changes in order with
// Positions (commit LSN, index within the transaction), and spools streamed
// in-progress transactions (protocol version 2) to temporary files until they
// commit, so a huge transaction does not have to fit in memory. Aborted
// streamed transactions and rolled-back subtransactions are never delivered.
//
// The Decoder is package pgcdc/pgoutput's; pgcdc re-exports its names
// (Decoder, DecoderConfig, NewDecoder, Txn, Message, DecodeError, Catalog
// and its types, ErrDecoderClosed) as aliases. Run's Decoder is built with
// pgoutput.NewDecoder like any other: what it knows
// beyond the pgoutput messages comes from its DecoderConfig, and what it
// asks the database goes through DecoderConfig.Catalog, which Run sets to
// one reading the catalog. Below, what "Run" does is what a Decoder with
// such a Catalog (and Run's KeylessTables and PrevCommitEnd) does, and "a
// Decoder used alone" or "without Run" is one without a Catalog.
//
// Inserts become OpInsert events, updates OpUpdate, deletes OpDelete, and a
// TRUNCATE one OpTruncate event per published table it emptied (tables
// reached through CASCADE included), each with the statement's CASCADE and
// RESTART IDENTITY options in Event.Truncate. An update that changes the key
// (its old key or old row differs from the new row in the key columns)
// becomes an OpDelete of the old row and an OpInsert of the new one, with
// consecutive indexes: a compacted topic would otherwise keep the old key
// forever. Event.Key names the columns Config.KeyColumns gives for the
// table, else the replica identity columns the server flags (DEFAULT: the
// primary key; USING INDEX: the index's columns), else, for REPLICA
// IDENTITY FULL or NOTHING (FULL flags every column, which names no row),
// the primary key, which Run looks up in the catalog for the snapshot and
// the stream alike. A table with none of these has an empty Key, so its
// records are keyed by event id; Run logs that once per table. With
// Config.KeylessTables its events are kafkasink.Event.Keyless instead,
// which the sink writes with a null key to partition 0, as Debezium
// writes them (a compacted topic refuses such records, so the sink rejects
// them there, reason no_key, naming the fix). PostgreSQL
// refuses UPDATE and DELETE on a published table whose replica identity
// is DEFAULT without a primary key, or NOTHING: only its inserts stream;
// with REPLICA IDENTITY FULL its updates and deletes carry the whole old
// row as Before.
//
// Key columns are listed in the order of their index (pg_index.indkey),
// not of the table: PRIMARY KEY (b, a) keys a row {"b":1,"a":"k"} (text
// key 1|k), as Debezium does, for snapshot rows and changes alike. The
// Relation message flags the identity columns in the table's order, so
// Run reads the index's order from the catalog at each Relation message;
// a Decoder used alone keeps the table's order. Config.KeyColumns keeps
// the order it gives. (Earlier versions listed the columns of a DEFAULT
// or USING INDEX identity in the table's order: a multi-column key whose
// index orders its columns otherwise has other key bytes since, so its
// rows move to new keys, and perhaps partitions, at the upgrade; to keep
// the old keys, name the columns in the table's order in
// Config.KeyColumns.)
//
// An update's Before is set when the server sends the old row (REPLICA
// IDENTITY FULL: every column) or the old key (the key columns only, sent
// when the key changed or is stored out of line). A delete's Before is the
// old key or, with FULL, the old row. Unchanged TOAST values (large values an
// update did not touch) arrive without data: their Column has Unchanged set
// and a nil Value, unless the full old row (REPLICA IDENTITY FULL)
// supplies the value. After a key change no earlier record under the new
// key holds such a value, and compaction can remove the one under the same
// key that did; so at start-up Run logs a warning naming the published
// tables that have TOASTable columns and a replica identity other than
// FULL, and recommends FULL for consumers that keep the latest row per
// key. The upsert encoder marks documents that leave columns out as
// "partial".
//
// Every change also says where it stands in its transaction
// (kafkasink.Event.Txn), for encoders that describe transactions
// (debezium.Encoder's ProvideTransactionMetadata): its place among the
// transaction's counted events and among those of its table, whether it
// is the transaction's first, and, on its last, the transaction as a
// whole (the end of its commit record, the counted events in all and per
// table). Which events count is DecoderConfig.Counted's to say; Run asks
// its sink (kafkasink.Sink.Delivers), so that the events the sink's
// Encoder skips (a TRUNCATE under debezium.Encoder's default
// SkippedOperations) are not counted, as Debezium counts only what it
// emits. To know which event is the last, the Decoder holds each event
// until the next change or the commit arrives, and delivers it then: a
// Decoder used alone fills Event.Txn too, for ordinary and streamed
// transactions alike. Snapshot rows have none.
//
// Logical decoding messages (pg_logical_emit_message) are not row events; they
// go to DecoderConfig.OnMessage.
//
// # Values
//
// Values arrive in text format (or binary, with the "binary" option) and are
// converted by the column's type OID:
//
//	PostgreSQL type                     Go value
//	----------------------------------  ---------------------------------------------
//	NULL                                nil
//	unchanged TOAST                     nil, with Column.Unchanged set
//	smallint, integer, bigint           int16, int32, int64
//	oid                                 uint32
//	real, double precision              float32, float64 (NaN and ±Inf included)
//	numeric                             kafkasink.Decimal, exact text ("NaN", "Infinity" kept)
//	boolean                             bool
//	text, varchar, char(n), name, "char" string
//	uuid                                string, canonical lower-case form
//	json, jsonb                         json.RawMessage (a copy); 'null' is json.RawMessage("null")
//	bytea                               []byte (hex and escape output formats)
//	date                                string "2006-01-02", or "infinity"/"-infinity"
//	timestamp                           string "2006-01-02T15:04:05.999999", or "infinity"/"-infinity"
//	timestamptz                         time.Time in UTC, or string "infinity"/"-infinity"
//	time, timetz, interval              string, the server's text
//	arrays of any type                  []any, nested per dimension, NULL elements nil
//	domains                             as their base type (a domain over int[] is []any)
//	composite types                     map[string]any by attribute name, NULL attributes nil
//	enums, ranges, other types          string, the server's text
//	binary values pgx cannot decode     []byte, the raw binary form
//
// The built-in encoders write a json.RawMessage as a JSON string holding
// the document's text, so a jsonb 'null' ("null") and an SQL NULL (null)
// stay apart, as columns and as array elements.
//
// Run learns what a type that is not built in is made of from the catalog
// (pg_type: typbasetype, typelem, typdelim; pg_attribute for composites;
// pg_enum for an enum's labels) when a Relation message or the snapshot
// first uses it, and again at every later Relation message, so arrays of
// enums and composites, domains and composites convert as the table shows. The catalog is read at that
// moment, not at the change's. pgoutput announces no ALTER TYPE, so a
// streamed composite value that does not fit its type as described (an
// attribute added or dropped since) makes Run describe the type again; a
// value from before such a change (decoding behind the catalog) keeps its
// text, as do values of a type dropped since. Attribute names are those
// of the last description (a RENAME ATTRIBUTE shows at the next Relation
// message). A Decoder used without Run has no catalog: such values keep
// their text.
//
// Every event carries Event.Relation: the table's columns in order (the
// published ones) with their declared types, one *Relation shared by all
// events of one table version (a new one at each Relation message, one
// per table in the snapshot). A type is its OID, typname, typtype, the
// column's atttypmod (a numeric's precision and scale, a time's
// fractional precision, a bit length), an array's element type, a
// domain's base type with the domain's typtypmod, and an enum's labels in
// their order (an ALTER TYPE ... ADD VALUE shows at the next Relation
// message, as a redefined type does); names of types pgx does not know
// come from the catalog (a Decoder without Run names only the
// built-in ones). NotNull is pg_attribute.attnotnull, which pgoutput does
// not send: Run reads it from the catalog at each Relation message (a
// Decoder without Run marks the replica identity columns of a table whose
// identity is not FULL). Default is the column's DEFAULT expression
// (pg_get_expr of pg_attrdef; none for a generated column), read with
// NotNull (a Decoder without Run leaves it empty); debezium.Encoder
// declares it in its schemas as Debezium does. debezium.Encoder writes
// values by these types.
//
// A date or a timestamp without time zone names a calendar day or a
// wall-clock reading, not an instant, so it stays text rather than becoming
// a time.Time in an invented zone. Years before 1 AD are written the ISO 8601
// way: 1 BC is "0000", 2 BC is "-0001". Array lower bounds other than 1 are
// dropped. Binary values of types pgx knows are re-rendered as text and
// converted as above, so text and binary replication yield the same values.
//
// The conversions assume fixed output settings, so every connection Run
// opens (replication, snapshot, heartbeat) sends them at start-up, where
// they override ALTER ROLE and ALTER DATABASE settings and anything the
// connection string says: client_encoding UTF8, DateStyle "ISO, MDY",
// IntervalStyle postgres, TimeZone UTC, extra_float_digits 3 (floats
// round-trip), bytea_output hex and lc_monetary C (money's text).
// search_path is left as configured: it only changes the text of reg*
// columns (regclass and the like, names qualified when not on the path),
// which stay text. A value that does not parse for its type is an error;
// the message never quotes the value, because row data may be
// confidential. A Decoder used without Run gets the text its connection's
// settings print: interval and money text then stays text, which
// debezium.Encoder refuses (an *EncodeError: the event is rejected or
// dead-lettered) unless the connection has IntervalStyle postgres and
// lc_monetary C.
package pgcdc
