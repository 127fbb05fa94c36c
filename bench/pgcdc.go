package main

// The -pgcdc mode: the whole pipeline, real PostgreSQL → pgcdc →
// kafkasink → real Kafka, against a plain pglogrepl loop that reads the
// same slot contents and discards them (the ceiling). See README.md.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

var (
	pgcdcMode   = flag.Bool("pgcdc", false, "measure real PostgreSQL → pgcdc → kafkasink → Kafka (see README.md) instead of Sink.Write")
	pgConn      = flag.String("pg", os.Getenv("KAFKASINK_TEST_PG"), "-pgcdc: PostgreSQL connection string (default $KAFKASINK_TEST_PG)")
	txnRows     = flag.Int("txn-rows", 100, "-pgcdc: rows each workload transaction updates")
	tableRows   = flag.Int("table-rows", 10000, "-pgcdc: rows of the table; every round updates each the same number of times")
	pgcdcChild  = flag.String("pgcdc-child", "", "") // hidden: run one pgcdc spec in this process
	namePrefix  = flag.String("name-prefix", "", "-pgcdc, -snapshot, -backfill: name the table, slots and topics PREFIX_<random>... instead of kafkasink_bench_<random> and kafkasink-bench-<random>-... (a shared server's naming rule)")
	latency     = flag.Int("latency", 200, "-pgcdc: transactions of the latency phase after each sink contender's run, 0 for none (see README.md)")
	latencyRate = flag.Float64("latency-rate", 40, "-pgcdc: transactions per second of the latency phase")
)

// pgSpec is one pgcdc-mode run, handed to the child process as JSON.
type pgSpec struct {
	Contender   string
	ConnString  string
	Slot        string
	Publication string
	Table       string // in schema public
	Brokers     []string
	Topic       string
	// CheckpointTopic is the sink's, made for the run.
	CheckpointTopic string
	Compression     string
	// EndMark is an LSN between the commits of the workload's last two
	// transactions: the run is complete when it has consumed a
	// transaction whose commit ends after it. Zero in a soak or a
	// latency run, whose child reads it from its standard input when the
	// writer stops.
	EndMark kafkasink.LSN
	// Latency marks a latency run (pgcdc_latency.go): its writer commits
	// while the child streams, so the end mark comes on the standard
	// input, as a soak's does.
	Latency bool
	Profile string // file prefix for the CPU profile; empty: none
	Soak    *soakSpec
	// Headers is the sink's Config.Headers (kafkasink.ParseHeaderSet);
	// empty: all.
	Headers string
}

// pgResult is what a pgcdc-mode run measured, printed by the child as one
// JSON line.
type pgResult struct {
	Changes int64   // changes consumed: events delivered, or messages counted by the discard loop
	Seconds float64 // from the start of the run to the end mark consumed
	Mallocs uint64  // Go heap allocations meanwhile
	RSS     int64   // peak resident set (VmHWM), bytes
	// Bytes is what the run moved: pgoutput bytes for the discard loop,
	// key, value and header bytes read back from the topic for a sink
	// (filled in by the parent).
	Bytes   int64
	Samples []soakSample `json:",omitempty"`
	// Latencies are commit to visible of each transaction of the latency
	// phase that followed the run (filled in by the parent).
	Latencies []time.Duration `json:",omitempty"`
}

// pgContender is one way to stream the slot.
type pgContender struct {
	name string
	what string
	sink bool // writes to Kafka: its topic is made, read back and checked
	run  func(ctx context.Context, s pgSpec) (pgResult, error)
}

var pgContenders = []pgContender{
	{"pglogrepl-discard", "pglogrepl loop on the slot: reads and parses every message, confirms, discards (the ceiling)", false, runDiscard},
	{"pgcdc-eos", "pgcdc.Run into a kafkasink ExactlyOnce sink", true, runPgcdc(kafkasink.ExactlyOnce)},
	{"pgcdc-idempotent", "pgcdc.Run into a kafkasink Idempotent sink", true, runPgcdc(kafkasink.Idempotent)},
	{"pgcdc-plain", "pgcdc.Run into a kafkasink Plain sink", true, runPgcdc(kafkasink.Plain)},
}

// pgConfig is what the flags asked of the -pgcdc mode.
type pgConfig struct {
	conn        string
	brokers     []string
	contenders  []pgContender
	sizes       []int
	events      int // changes per round
	txnRows     int
	tableRows   int
	rounds      int
	compression string
	partitions  int32
	profile     string
	soak        time.Duration
	soakEvery   time.Duration
	headers     string  // -soak: the sink's Config.Headers, as kafkasink.ParseHeaderSet reads it
	latency     int     // transactions of each latency phase; 0: none
	latencyRate float64 // their rate, per second
}

// sharedFlags are the values of main's flags that the -pgcdc mode reads
// too.
type sharedFlags struct {
	brokers, sizes, only, compression, profile, headers string
	events, rounds, partitions                          int
}

// pgcdcMain runs the -pgcdc mode: the table of the contenders, or with
// -soak the soak.
func pgcdcMain(f sharedFlags) error {
	cfg, err := pgcdcConfig(f)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// An interrupt ends the runs and still drops the slots, publication,
	// table and topics on the shared servers.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.soak > 0 {
		rep, err := soak(ctx, cfg, pgChildRunner(exe), os.Stderr)
		if rep != nil {
			fmt.Print(rep.table())
		}
		return err
	}
	res, err := pgRun(ctx, cfg, pgChildRunner(exe), os.Stderr)
	if err != nil {
		return err
	}
	fmt.Print(pgTable(cfg, res))
	return nil
}

// pgcdcFlagsUnused refuses the flags of the -pgcdc mode without it.
func pgcdcFlagsUnused() error {
	var set []string
	flag.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "pg", "txn-rows", "table-rows", "soak", "soak-every", "latency", "latency-rate":
			set = append(set, "-"+fl.Name)
		}
	})
	if len(set) > 0 {
		return fmt.Errorf("%s: only for -pgcdc; add -pgcdc, or drop them", strings.Join(set, ", "))
	}
	return nil
}

// pgcdcConfig checks the flags of the -pgcdc mode.
func pgcdcConfig(f sharedFlags) (pgConfig, error) {
	set := map[string]bool{}
	flag.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["batches"] {
		return pgConfig{}, errors.New("-batches does not apply to -pgcdc: pgcdc batches whole transactions itself (pgcdc.Config.BatchMaxEvents, BatchMaxBytes); drop the flag")
	}
	if *pgConn == "" {
		return pgConfig{}, errors.New("-pgcdc needs PostgreSQL: pass -pg, or load the integration environment with eval \"$(scripts/testenv.sh env)\"")
	}
	if f.brokers == "" {
		return pgConfig{}, errors.New("no brokers: pass -brokers, or load the integration environment with eval \"$(scripts/testenv.sh env)\"")
	}
	cfg := pgConfig{
		conn: *pgConn, brokers: strings.Split(f.brokers, ","), events: f.events, txnRows: *txnRows, tableRows: *tableRows,
		rounds: f.rounds, compression: f.compression, partitions: int32(f.partitions), profile: f.profile,
		soak: *soakFor, soakEvery: *soakEvery, latency: *latency, latencyRate: *latencyRate,
	}
	if !set["rounds"] {
		cfg.rounds = 5 // the targets are medians of at least 5 rounds
	}
	var err error
	if cfg.sizes, err = ints("-sizes", f.sizes); err != nil {
		return pgConfig{}, err
	}
	if cfg.soak > 0 {
		for _, name := range []string{"only", "rounds", "events", "latency", "latency-rate"} {
			if set[name] {
				return pgConfig{}, fmt.Errorf("-%s does not apply to -soak: a soak runs pgcdc-eos once, as long as -soak says; drop the flag", name)
			}
		}
		if set["sizes"] && len(cfg.sizes) > 1 {
			return pgConfig{}, fmt.Errorf("-soak takes one row size; -sizes gives %d", len(cfg.sizes))
		}
		cfg.sizes = cfg.sizes[:1]
		if _, err := kafkasink.ParseHeaderSet(f.headers); err != nil {
			return pgConfig{}, fmt.Errorf("-soak takes one header set (-headers): %w", err)
		}
		cfg.headers = f.headers
	} else if f.headers != "all" {
		return pgConfig{}, fmt.Errorf("-headers %s: the -pgcdc table writes every header; -headers applies to -soak and to the other contenders", f.headers)
	}
	if cfg.contenders, err = pickPG(f.only); err != nil {
		return pgConfig{}, err
	}
	if _, err := kafkasink.ParseCompression(cfg.compression); err != nil {
		return pgConfig{}, fmt.Errorf("-pgcdc takes one compression: %w", err)
	}
	return cfg, cfg.check()
}

func (cfg pgConfig) check() error {
	switch {
	case cfg.txnRows < 1 || cfg.tableRows < 1 || cfg.rounds < 1:
		return fmt.Errorf("-txn-rows %d, -table-rows %d, -rounds %d: each must be at least 1", cfg.txnRows, cfg.tableRows, cfg.rounds)
	case cfg.tableRows%cfg.txnRows != 0:
		return fmt.Errorf("-table-rows %d is not a multiple of -txn-rows %d: a transaction updates a run of rows that must not wrap around the table", cfg.tableRows, cfg.txnRows)
	case cfg.soak == 0 && cfg.events%cfg.tableRows != 0:
		return fmt.Errorf("-events %d is not a multiple of -table-rows %d: each round updates every row the same number of times", cfg.events, cfg.tableRows)
	case cfg.soak < 0 || cfg.soakEvery <= 0:
		return fmt.Errorf("-soak %v, -soak-every %v: want a positive duration", cfg.soak, cfg.soakEvery)
	case cfg.latency < 0 || cfg.latencyRate <= 0:
		return fmt.Errorf("-latency %d, -latency-rate %v: want at least 0 transactions at a positive rate per second", cfg.latency, cfg.latencyRate)
	}
	return nil
}

func pickPG(only string) ([]pgContender, error) {
	if only == "" {
		return pgContenders, nil
	}
	var out []pgContender
	for _, n := range strings.Split(only, ",") {
		i := slices.IndexFunc(pgContenders, func(c pgContender) bool { return c.name == n })
		if i < 0 {
			var names []string
			for _, c := range pgContenders {
				names = append(names, c.name)
			}
			return nil, fmt.Errorf("-only: unknown -pgcdc contender %q; they are %s", n, strings.Join(names, ", "))
		}
		out = append(out, pgContenders[i])
	}
	return out, nil
}

// pgRunner runs one spec and returns what it measured.
type pgRunner func(ctx context.Context, s pgSpec, stdin io.Reader) (pgResult, error)

// pgResults are each contender's runs per row size, in round order.
type pgResults map[int]map[string][]pgResult

// pgEnv is one invocation's objects on the shared servers, all named
// after one random prefix, and their cleanup.
type pgEnv struct {
	cfg    pgConfig
	db     *pgx.Conn
	admin  *kadm.Client
	kcl    *kgo.Client
	name   string // table, publication, and the prefix of the slots
	topics string // prefix of the topics
	rf     int16
	n      int // runs so far, for unique slot and topic names
	// liveNext is the last row id the latency phases inserted.
	liveNext int64
}

func openPGEnv(ctx context.Context, cfg pgConfig) (*pgEnv, error) {
	db, err := pgx.Connect(ctx, cfg.conn)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL (-pg): %w", err)
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		db.Close(ctx)
		return nil, err
	}
	e := &pgEnv{cfg: cfg, db: db, kcl: kcl, admin: kadm.NewClient(kcl)}
	brokers, err := e.admin.ListBrokers(ctx)
	if err != nil {
		e.close()
		return nil, fmt.Errorf("listing the brokers of %s: %w", strings.Join(cfg.brokers, ","), err)
	}
	e.rf = int16(min(3, len(brokers)))
	hex := randomHex()
	e.name, e.topics = "kafkasink_bench_"+hex, "kafkasink-bench-"+hex+"-"
	if *namePrefix != "" {
		e.name, e.topics = *namePrefix+"_"+hex, *namePrefix+"_"+hex+"_"
	}
	// The workload's commits need not wait for the disk: walsenders
	// stream WAL once flushed, a fraction of a second later.
	if _, err := db.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// close drops every slot, the publication, the table and the topics of
// this invocation, also after a failure or an interrupt.
func (e *pgEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if e.name != "" {
		e.dropSlots(ctx, slotPrefixed, e.name+"_")
		e.cleanup(ctx, func(db *pgx.Conn) error {
			for _, name := range []string{e.name, e.liveName()} {
				if _, err := db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name); err != nil {
					return err
				}
				if _, err := db.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
					return err
				}
			}
			return nil
		})
		deleteTopics(e.admin, e.topics)
	}
	e.db.Close(ctx)
	e.kcl.Close()
}

// cleanup runs drop on a connection of its own. The run's connection may
// be unusable when cleaning up after an interrupt: pgx closes a
// connection whose query's context ends, and the soak's writer may still
// be using it. A failure is reported, since it leaves objects on the
// shared server.
func (e *pgEnv) cleanup(ctx context.Context, drop func(*pgx.Conn) error) {
	db, err := pgx.Connect(ctx, e.cfg.conn)
	if err == nil {
		err = drop(db)
		db.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: cleaning up %s on PostgreSQL: %v (drop it by hand)\n", e.name, err)
	}
}

// dropSlots drops the slots that match (a condition on slot_name with
// one parameter, arg), ending the walsenders that still hold them (a
// child that failed may not have let go yet), and tries again for a
// while.
func (e *pgEnv) dropSlots(ctx context.Context, match, arg string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	e.cleanup(ctx, func(db *pgx.Conn) error {
		for {
			_, err := db.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE "+match+" AND active_pid IS NOT NULL", arg)
			if err == nil {
				_, err = db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "+match, arg)
			}
			if err == nil || ctx.Err() != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// The conditions of dropSlots: a slot's name, all of this invocation's.
const (
	slotNamed    = "slot_name = $1"
	slotPrefixed = "starts_with(slot_name::text, $1)"
)

// createTable makes the table and its publication.
func (e *pgEnv) createTable(ctx context.Context) error { return e.createTableNamed(ctx, e.name) }

// createTableNamed makes a table of the workload's columns named name,
// and a publication of it of the same name.
func (e *pgEnv) createTableNamed(ctx context.Context, name string) error {
	for _, sql := range []string{
		"CREATE TABLE " + name + " (id bigint PRIMARY KEY, version bigint NOT NULL, status text NOT NULL, amount numeric(12,2) NOT NULL, updated_at timestamptz NOT NULL, note text NOT NULL)",
		"CREATE PUBLICATION " + name + " FOR TABLE " + name,
	} {
		if _, err := e.db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}

// noteLength is the length of the note column that makes a row's text
// about size bytes: the other columns take about 64.
func noteLength(size int) int { return max(0, size-64) }

// randomNote is SQL for n random hexadecimal characters, new for every
// row (the subquery refers to the row's id, so it is evaluated per row),
// so that compression does not make the rows vanish. The aggregate's
// argument names g too, or PostgreSQL would aggregate over the outer
// query.
func randomNote(n int) string {
	return fmt.Sprintf("left((SELECT string_agg(md5(random()::text || id::text || g::text), '') FROM generate_series(0, %d) g), %d)", n/32, n)
}

// insertRows inserts rows from, from+1, ... to, with version 1, in one
// transaction.
func (e *pgEnv) insertRows(ctx context.Context, from, to int64, size int) error {
	_, err := e.db.Exec(ctx, insertSQL(e.name, size), from, to)
	return err
}

// insertSQL inserts rows $1 to $2 of about size bytes into table, with
// version 1.
func insertSQL(table string, size int) string {
	return "INSERT INTO " + table + " (id, version, status, amount, updated_at, note) SELECT id, 1, 'new', id * 1.25, now(), " +
		randomNote(noteLength(size)) + " FROM generate_series($1::bigint, $2::bigint) id"
}

// updateRows updates rows from to to in one transaction: a new version,
// amount and timestamp, and a new random note of about size bytes of row.
// With mark it returns an LSN after every change of the transaction and
// before its commit: the end mark, when it is the workload's last.
func (e *pgEnv) updateRows(ctx context.Context, from, to int64, size int, mark bool) (kafkasink.LSN, error) {
	sql := "UPDATE " + e.name + " SET version = version + 1, status = 'shipped', amount = amount + 1, updated_at = now(), note = " +
		randomNote(noteLength(size)) + " WHERE id BETWEEN $1 AND $2"
	return execMarked(ctx, e.db, mark, sql, from, to)
}

// execMarked runs sql in one transaction on db. With mark it returns an
// LSN after every change of the transaction and before its commit.
func execMarked(ctx context.Context, db *pgx.Conn, mark bool, sql string, args ...any) (kafkasink.LSN, error) {
	if !mark {
		_, err := db.Exec(ctx, sql, args...)
		return 0, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var lsn string
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return 0, err
	}
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return 0, err
	}
	end, err := kafkasink.ParseLSN(lsn)
	if err != nil {
		return 0, err
	}
	return end, tx.Commit(ctx)
}

// versions returns every row's version as the database holds it.
func (e *pgEnv) versions(ctx context.Context) (map[int64]int64, error) {
	rows, err := e.db.Query(ctx, "SELECT id, version FROM "+e.name)
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	var id, v int64
	_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error { out[id] = v; return nil })
	return out, err
}

// createSlot makes a logical replication slot of pgoutput, named after
// the invocation and n.
func (e *pgEnv) createSlot(ctx context.Context) (string, error) {
	e.n++
	slot := fmt.Sprintf("%s_%d", e.name, e.n)
	if _, err := e.db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return "", fmt.Errorf("creating slot %s: %w", slot, err)
	}
	return slot, nil
}

// spec is a run of contender c on slot: for a sink, its topic and
// checkpoint topic are made.
func (e *pgEnv) spec(ctx context.Context, c pgContender, slot string, mark kafkasink.LSN) (pgSpec, error) {
	s := pgSpec{Contender: c.name, ConnString: e.cfg.conn, Slot: slot, Publication: e.name, Table: e.name,
		Brokers: e.cfg.brokers, Compression: e.cfg.compression, EndMark: mark}
	if !c.sink {
		return s, nil
	}
	s.Topic = e.topics + strings.TrimPrefix(slot, e.name+"_")
	s.CheckpointTopic = s.Topic + "-ckpt"
	if err := createTopic(ctx, e.admin, s.Topic, e.cfg.partitions, e.rf, nil); err != nil {
		return s, err
	}
	compact := "compact"
	return s, createTopic(ctx, e.admin, s.CheckpointTopic, 1, e.rf, map[string]*string{"cleanup.policy": &compact})
}

// dropRun drops the slot and topics of a finished run at once, so that
// the shared servers do not keep their WAL and records until the end.
func (e *pgEnv) dropRun(ctx context.Context, s pgSpec) {
	ctx = context.WithoutCancel(ctx) // also after an interrupt
	e.dropSlots(ctx, slotNamed, s.Slot)
	if s.Topic != "" {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, _ = e.admin.DeleteTopics(dctx, s.Topic, s.CheckpointTopic)
	}
}

// pgRun measures every contender at every row size, cfg.rounds times.
// Each round, for each size, makes one slot per contender, then writes
// the workload (cfg.events updates in transactions of cfg.txnRows), so
// that every slot holds the same changes, then runs the contenders one
// after the other, each starting one later than the round before. A
// sink's topic is read back and must hold every change once; the discard
// loop must have counted every change. With cfg.latency, each sink
// contender's run is followed by its latency phase (pgcdc_latency.go).
func pgRun(ctx context.Context, cfg pgConfig, runOne pgRunner, log io.Writer) (pgResults, error) {
	e, err := openPGEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := e.createTable(ctx); err != nil {
		return nil, err
	}
	if cfg.latency > 0 {
		if err := e.createTableNamed(ctx, e.liveName()); err != nil {
			return nil, err
		}
	}
	for from := int64(1); from <= int64(cfg.tableRows); from += int64(cfg.txnRows) {
		if err := e.insertRows(ctx, from, from+int64(cfg.txnRows)-1, cfg.sizes[0]); err != nil {
			return nil, fmt.Errorf("filling table %s: %w", e.name, err)
		}
	}
	out := pgResults{}
	for round := range cfg.rounds {
		for _, size := range cfg.sizes {
			if out[size] == nil {
				out[size] = map[string][]pgResult{}
			}
			slots := make([]string, len(cfg.contenders))
			for i := range slots {
				if slots[i], err = e.createSlot(ctx); err != nil {
					return nil, err
				}
			}
			began := time.Now()
			mark, err := e.workload(ctx, size)
			if err != nil {
				return nil, fmt.Errorf("round %d: writing the workload of %d B rows: %w", round+1, size, err)
			}
			fmt.Fprintf(log, "round %d %5d B: %d updates written in %v\n", round+1, size, cfg.events, time.Since(began).Round(time.Millisecond))
			for i := range cfg.contenders {
				k := (i + round) % len(cfg.contenders)
				c := cfg.contenders[k]
				r, err := e.runVerified(ctx, c, slots[k], mark, round, size, runOne)
				if err != nil {
					return nil, fmt.Errorf("round %d, %d B rows: %s: %w", round+1, size, c.name, err)
				}
				var latency string
				if c.sink && cfg.latency > 0 {
					if r.Latencies, err = e.runLatency(ctx, c, size, runOne); err != nil {
						return nil, fmt.Errorf("round %d, %d B rows: %s, latency phase: %w", round+1, size, c.name, err)
					}
					latency = fmt.Sprintf("  commit to visible p50 %v p99 %v",
						percentile(r.Latencies, 50).Round(100*time.Microsecond), percentile(r.Latencies, 99).Round(100*time.Microsecond))
				}
				fmt.Fprintf(log, "round %d %5d B  %-18s %9.0f events/s  %6.1f allocs/event  %4d MiB%s\n",
					round+1, size, c.name, float64(r.Changes)/r.Seconds, float64(r.Mallocs)/float64(r.Changes), r.RSS>>20, latency)
				out[size][c.name] = append(out[size][c.name], r)
			}
		}
	}
	return out, nil
}

// workload updates every row of the table cfg.events / cfg.tableRows
// times, cfg.txnRows consecutive rows per transaction, and returns the end
// mark taken in the last transaction.
func (e *pgEnv) workload(ctx context.Context, size int) (kafkasink.LSN, error) {
	txns := e.cfg.events / e.cfg.txnRows
	var mark kafkasink.LSN
	for k := range txns {
		from := int64(k*e.cfg.txnRows%e.cfg.tableRows) + 1
		var err error
		if mark, err = e.updateRows(ctx, from, from+int64(e.cfg.txnRows)-1, size, k == txns-1); err != nil {
			return 0, err
		}
	}
	return mark, nil
}

// runVerified runs contender c on slot and checks what it consumed: a
// sink's topic must hold each of the round's changes once, the discard
// loop must have counted them all. The slot and topics go afterwards.
func (e *pgEnv) runVerified(ctx context.Context, c pgContender, slot string, mark kafkasink.LSN, round, size int, runOne pgRunner) (pgResult, error) {
	s, err := e.spec(ctx, c, slot, mark)
	defer e.dropRun(ctx, s)
	if err != nil {
		return pgResult{}, err
	}
	if e.cfg.profile != "" {
		s.Profile = fmt.Sprintf("%s/%s-%dB-r%d", e.cfg.profile, c.name, size, round+1)
	}
	r, err := runOne(ctx, s, nil)
	if err != nil {
		return pgResult{}, err
	}
	if r.Changes != int64(e.cfg.events) {
		return pgResult{}, fmt.Errorf("consumed %d changes up to the end mark %s; the workload made %d", r.Changes, mark, e.cfg.events)
	}
	if !c.sink {
		return r, nil
	}
	versions, err := e.versions(ctx)
	if err != nil {
		return pgResult{}, err
	}
	want := map[int64]rowWant{}
	perRow := int64(e.cfg.events / e.cfg.tableRows)
	for id, v := range versions {
		want[id] = rowWant{changes: perRow, version: v}
	}
	if r.Bytes, err = verifyTopic(ctx, e.admin, e.cfg.brokers, s.Topic, want); err != nil {
		return pgResult{}, err
	}
	return r, nil
}

// pgTable renders res as one Markdown table: per row size and contender,
// the medians over the rounds, the median of the per-round ratios to
// pgcdc-plain and to pglogrepl-discard, the commit-to-visible
// percentiles of every round's latency phase, and the two targets.
func pgTable(cfg pgConfig, res pgResults) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d updates per round in transactions of %d rows of a %d-row table, %d rounds (medians), %d partitions, %s compression\n",
		cfg.events, cfg.txnRows, cfg.tableRows, cfg.rounds, cfg.partitions, cfg.compression)
	if cfg.latency > 0 {
		fmt.Fprintf(&b, "latency: after each sink's run, %d transactions of %d rows at %g a second on a fresh slot; p50 and p99 of all rounds' transactions\n",
			cfg.latency, liveTxnRows, cfg.latencyRate)
	}
	b.WriteString("\n| row | contender | events/s | MB/s | allocs/event | peak RSS MiB | ÷ pgcdc-plain | ÷ pglogrepl-discard | commit to visible p50 ms | p99 ms |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var targets []string
	for _, size := range cfg.sizes {
		runs := res[size]
		for _, c := range cfg.contenders {
			rs := runs[c.name]
			fmt.Fprintf(&b, "| %d B | %s | %.0fk | %.1f | %.1f | %.0f | %s | %s | %s |\n", size, c.name,
				pgMedian(rs, func(r pgResult) float64 { return r.rate() / 1000 }),
				pgMedian(rs, func(r pgResult) float64 { return float64(r.Bytes) / r.Seconds / 1e6 }),
				pgMedian(rs, func(r pgResult) float64 { return float64(r.Mallocs) / float64(r.Changes) }),
				pgMedian(rs, func(r pgResult) float64 { return float64(r.RSS) / (1 << 20) }),
				formatRatio(pgRatio(runs, c.name, "pgcdc-plain")), formatRatio(pgRatio(runs, c.name, "pglogrepl-discard")), latencyCells(rs))
		}
		for _, t := range []struct {
			base string
			want float64
		}{{"pgcdc-plain", 0.9}, {"pglogrepl-discard", 0.75}} {
			if x, ok := pgRatio(runs, "pgcdc-eos", t.base); ok {
				verdict := "met"
				if x < t.want {
					verdict = "MISSED"
				}
				targets = append(targets, fmt.Sprintf("- %d B rows: pgcdc-eos ÷ %s = %.2f, target ≥ %.2f: %s", size, t.base, x, t.want, verdict))
			}
		}
	}
	if len(targets) > 0 {
		b.WriteString("\nTargets (issue 11), medians of per-round ratios:\n" + strings.Join(targets, "\n") + "\n")
	}
	b.WriteString("\nMB/s: pgoutput bytes for pglogrepl-discard; key, value and header bytes read back from the topic for the sinks.\n")
	if cfg.latency > 0 {
		b.WriteString("Commit to visible: from the writer sending the transaction (one INSERT, committed as it runs) to the arrival of the transaction's last row at a read_committed consumer of the topic.\n")
	}
	b.WriteString("Contenders:\n")
	for _, c := range cfg.contenders {
		fmt.Fprintf(&b, "- %s: %s\n", c.name, c.what)
	}
	return b.String()
}

func (r pgResult) rate() float64 { return float64(r.Changes) / r.Seconds }

// pgRatio is the median over the rounds of name's rate over base's in
// the same round; false when either did not run every round.
func pgRatio(runs map[string][]pgResult, name, base string) (float64, bool) {
	rs, bs := runs[name], runs[base]
	if name == base || len(rs) == 0 || len(rs) != len(bs) {
		return 0, false
	}
	xs := make([]float64, len(rs))
	for i := range rs {
		xs[i] = rs[i].rate() / bs[i].rate()
	}
	return median(xs), true
}

func formatRatio(x float64, ok bool) string {
	if !ok {
		return ""
	}
	return fmt.Sprintf("%.2f", x)
}

func pgMedian(rs []pgResult, f func(pgResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}
