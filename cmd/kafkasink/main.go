// Command kafkasink streams PostgreSQL logical replication into Kafka with
// pgcdc.Run and a kafkasink sink, exactly once by default, and logs its
// progress: events per second, and how far behind the database it is in
// bytes of WAL and in seconds.
//
//	go -C cmd/kafkasink run . \
//	    -pg 'postgres://cdc@db:5432/shop' -brokers kafka:9092 \
//	    -tables public.orders,public.customers -slot shop -publication shop
//
// Every flag falls back to an environment variable, named in -h
// (KAFKASINK_PG, KAFKASINK_BROKERS, ...), which falls back to a key of the
// YAML configuration file -config (the flag's name with '_' for '-' and
// '.'; kafkasink.example.yaml has them all), which falls back to the
// default. -h lists the flags by topic, one line each; kafkasink help
// gives their full descriptions; kafkasink version (or -version) prints
// the version stamped at build (-ldflags "-X main.version=... -X
// main.commit=..."), the commit and the Go version.
//
// The configuration is checked whole before anything waits, connects or
// creates: the flags, the environment (a KAFKASINK_* variable that is no
// setting is refused, naming the nearest one), the file, and the sink's,
// pgcdc's and the lease's own checks. Every problem is printed at once,
// one a line, naming the flag, its YAML key and its variable, and the
// exit status is 2. A password inside -pg is warned about.
//
// kafkasink check [-o json] [flags] connects with the same configuration
// and checks, changing nothing, what would stop or endanger the pipeline,
// each with its fix: PostgreSQL's wal_level, the role's REPLICATION and
// SELECT, the slot, the publication and its tables, replica identities,
// max_slot_wal_keep_size, free slots and wal senders, failover slots
// (17 and later: reported only); Kafka's transactional id and idempotent
// write rights (tried where trying changes nothing), the brokers'
// transaction.max.timeout.ms, the checkpoint topic (compacted, min ISR,
// or may be created), the topics of -tables (may be described, or
// created); the Schema Registry when the encoder needs it. It
// prints a table (or JSON) and exits 0, or 1 when a check failed. The
// run command runs the same checks before it waits for the lease: a
// failure no waiting cures (wal_level, a missing right) stops it with
// exit status 2, the rest are logged.
//
// kafkasink offsets show [-o json] [flags] prints the sink's checkpoint
// as the broker has it (read without claiming the transactional id, so
// safe while an instance runs), pgcdc's cursor in it (source identity,
// confirmed position, gaps, backfills, snapshot state), the slot and who
// holds the lease. kafkasink offsets reset -to current|resnapshot|<LSN>
// [-yes] moves the checkpoint through the sink's own exactly-once path
// (kafkasink.ResetCheckpoint, which fences any running instance): so it
// refuses while an instance holds the slot's lease or streams the slot,
// holds the lease itself while it writes, and only says what it would do
// without -yes. current reports only; an LSN counts every change
// committed up to it as delivered (never below the slot's confirmed
// position, which cannot stream them again); resnapshot drops the slot
// and deletes the checkpoint, for a next run with -snapshot.
//
// Secrets come from files or the environment only: the SASL
// password from -sasl-password-file or KAFKASINK_SASL_PASSWORD, the
// PostgreSQL password from -pg-password-file (read again for every
// connection) or PGPASSWORD, never from a flag (the process list shows
// it) nor the configuration file, which refuses them.
//
// With -http-addr (such as 127.0.0.1:9187; a loopback address unless
// -http-allow-remote) it serves /metrics (Prometheus: kafkasinkprom's
// collectors, the Go runtime's, the process's, and kafkasink_leader: 1
// while this replica holds the lease), /livez and /healthz (one check
// under two names: 200 unless a Kafka
// transaction has been open past the transaction timeout), /readyz (200
// while streaming, the sink answers Ping, and the lag is within
// -ready-max-lag-bytes and -ready-max-lag, or while a standby waits for
// the lease and PostgreSQL answers; 503 and the reason otherwise, naming
// PostgreSQL when it is down), /status (JSON: ready and its reason,
// leader, the state as a word, durations as Go duration strings, times in
// RFC 3339, LSNs as PostgreSQL writes them, the Monitor's and the sink's
// Stats, the backfills' progress) and /backfills, where kafkasink
// backfill asks for, lists, pauses, resumes and cancels backfills (see
// backfill.go).
//
// A table that joins the publication while it runs is streamed and, with
// -backfill-added-tables (on by default), its existing rows are read as
// a backfill beside its changes.
//
// Logs are JSON unless stderr is a terminal; there they are text, and the
// progress is one line rewritten in place below them.
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
// by someone else), and so does a promoted standby that lacks changes
// already in Kafka (a timeline divergence), unless -slot-gap says to read
// the tables again (resnapshot) or to go on across the gap (accept);
// either is logged and recorded in the checkpoint.
//
// Two replicas with the same configuration give high availability (-ha,
// on by default): each waits for the slot's lease, a lock in PostgreSQL,
// before it creates its sink, so one streams and the other waits, logging
// who holds the lease; the standby takes over when the active one exits,
// dies, or stops renewing the lease for -lease-timeout (frozen, cut off).
// A replica that lost its lease, or whose sink a newer one fenced, stops.
//
// Exit status: 0 after a signal, 1 on a runtime error, 2 on a
// configuration error, 3 when another instance took over: it fenced this
// one, or this one lost its lease.
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
	"sync"
	"syscall"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

func main() {
	cmd, args := command(os.Args[1:])
	switch cmd {
	case "version":
		fmt.Println(versionLine())
		return
	case "help":
		fs, settings := defineFlags(new(options))
		printUsage(os.Stdout, fs, settings, true)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "check":
		os.Exit(check(ctx, args, os.Getenv, os.Stdout, os.Stderr))
	case "offsets":
		os.Exit(offsets(ctx, args, os.Getenv, os.Stdout, os.Stderr))
	case "backfill":
		os.Exit(backfillCommand(ctx, args, os.Getenv, os.Stdout, os.Stderr))
	}
	ownProcess = true
	os.Exit(run(ctx, args, os.Getenv, os.Stderr))
}

// run is the program's run command; main only adds the other commands,
// the signals and the exit. Every configuration problem is found before
// anything waits, connects or creates, and all are printed together:
// exit status 2.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, problems, exit, ok := parseArgs(args, getenv, stderr)
	if !ok {
		return exit
	}
	logger, term, err := newLogger(o.logLevel, o.logFormat, stderr)
	problems = append(problems, problemsOf(err)...)
	kcfg, pcfg, err := o.configs(logger)
	if problems = append(problems, problemsOf(err)...); problems != nil {
		printProblems(stderr, configError(problems))
		return 2
	}
	for _, w := range o.debeziumWarnings {
		logger.Warn("-debezium-config: " + w)
	}
	if connStringHasPassword(o.pg) {
		logger.Warn("-pg holds a password, which the process list or the environment shows: " +
			"leave it out of -pg and give it with -pg-password-file (read again for every connection) or $PGPASSWORD")
	}
	if ownProcess {
		logger.Info("memory limit", "bytes", setMemoryLimit(o, getenv))
	}
	mon := new(pgcdc.Monitor)
	pcfg.Monitor = mon
	var web *httpServer
	if o.httpAddr != "" {
		var stopWeb func()
		if web, stopWeb, err = serveHTTP(o, kcfg, &pcfg, logger); err != nil {
			return fail(logger, err)
		}
		defer stopWeb()
	}

	// The checks of kafkasink check: a failure no waiting cures stops
	// the program now, not after the lease and the sink.
	if err := preflightAtStart(ctx, checkTarget{kcfg: kcfg, pcfg: pcfg, o: o}, logger); err != nil {
		return failOrStopped(ctx, logger, err)
	}
	if web != nil {
		web.standby.Store(true)
	}
	lctx, guard, release, err := lead(ctx, o.lease, pcfg, logger)
	if web != nil {
		web.standby.Store(false)
	}
	if err != nil {
		return failOrStopped(ctx, logger, err)
	}
	defer release()
	if web != nil {
		web.leader.Store(true)
		// Before release: a replica that lost its lease leads no more.
		defer web.leader.Store(false)
	}

	// New reads the checkpoint back; bound it so an unreachable cluster
	// ends the program instead of hanging it, but let a signal end it
	// sooner.
	nctx, cancel := context.WithTimeout(lctx, 2*time.Minute)
	kcfg.Guard = guard
	sink, err := kafkasink.New(nctx, kcfg)
	cancel()
	if err != nil {
		return failOrStopped(ctx, logger, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sink.Close(cctx); err != nil {
			logger.Warn("closing the sink", "error", err)
		}
	}()
	if web != nil {
		web.setSink(sink)
	}

	var wg sync.WaitGroup
	pctx, stopProgress := context.WithCancel(lctx)
	if o.progress > 0 {
		wg.Go(func() { reportProgress(pctx, logger, term, o.progress, mon, sink) })
	}
	err = pgcdc.Run(lctx, pcfg, sink)
	stopProgress()
	wg.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		logger.Info("stopped by signal", "events", mon.Stats().Events, "checkpoint", sink.Checkpoint().Position.String())
		return 0
	}
	return fail(logger, err)
}

// serveHTTP starts the HTTP server of -http-addr for Run's Monitor in
// pcfg, and gives pcfg the Backfills its /backfills asks.
func serveHTTP(o *options, kcfg kafkasink.Config, pcfg *pgcdc.Config, logger *slog.Logger) (*httpServer, func(), error) {
	web := newHTTPServer(pcfg.Monitor, pcfg.Slot, kcfg.TransactionTimeout, lagBounds{bytes: o.readyMaxLagBytes, age: o.readyMaxLag}, func(ctx context.Context) error {
		conn, err := connectPG(ctx, *pcfg)
		if err == nil {
			conn.Close(ctx)
		}
		return err
	})
	pcfg.Backfills = new(pgcdc.Backfills)
	web.backfills = pcfg.Backfills
	stop, err := web.serve(o.httpAddr, logger)
	return web, stop, err
}

// parseArgs reads the configuration every command takes (flags,
// environment, file) and returns it with the problems found so far, which
// the command reports with its own. When ok is false the command ends with
// status exit: 0 after -h, 2 when the configuration could not be read at
// all (printed).
func parseArgs(args []string, getenv func(string) string, stderr io.Writer) (o *options, problems []string, exit int, ok bool) {
	o, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil, 0, false
	}
	if o == nil {
		printProblems(stderr, err)
		return nil, nil, 2, false
	}
	return o, problemsOf(err), 0, true
}

// failOrStopped is fail, except for an error that a signal caused by
// ending ctx before streaming began (waiting for the lease, starting the
// sink): that is a clean stop, status 0.
func failOrStopped(ctx context.Context, logger *slog.Logger, err error) int {
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		logger.Info("stopped by signal before streaming", "error", err)
		return 0
	}
	return fail(logger, err)
}

// fail logs err and returns the exit status for it. A configuration
// error found only now (by the database or the brokers, such as a
// publication whose tables differ) is logged in the program's terms.
func fail(logger *slog.Logger, err error) int {
	var ce *kafkasink.ConfigError
	switch {
	case errors.As(err, &ce):
		logger.Error("stopped: configuration error", "problems", locate(libraryProblems(ce)))
		return 2
	case takenOver(err):
		logger.Error("stopped: another instance took over", "error", err, "fenced", errors.Is(err, kafkasink.ErrFenced), "lease_lost", errors.Is(err, pgcdc.ErrLeaseLost))
		return 3
	}
	// Its advice may name a setting (Config.DeadLetterTopic for a
	// rejected event): say it in flags too.
	logger.Error("stopped", "error", speakFlags(err.Error()))
	return 1
}

// problemsOf is the problems of err: a *kafkasink.ConfigError's, else
// err's text; none for nil.
func problemsOf(err error) []string {
	var ce *kafkasink.ConfigError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce.Problems
	}
	return []string{err.Error()}
}
