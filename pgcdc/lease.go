package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/backoff"
)

// DefaultLeaseTimeout is LeaseConfig.Timeout's default.
const DefaultLeaseTimeout = 10 * time.Second

// ErrLeaseLost is in Lease.Err once the lease was lost: its session ended
// (terminated, the server restarted, the network failed) or the holder
// could not renew it within LeaseConfig.Timeout (the process was frozen
// or cut off), so another process may hold it now. Test with errors.Is.
var ErrLeaseLost = errors.New("pgcdc: lease lost: another instance may have taken over")

// ErrLeaseReleased is Lease.Err after Release. Test with errors.Is.
var ErrLeaseReleased = errors.New("pgcdc: lease released")

// LeaseConfig configures AcquireLease. The zero value of every field but
// ConnString and Slot is a usable default.
type LeaseConfig struct {
	// ConnString and ConfigureConn reach the database as Config's
	// fields of the same names do; pass Run's. The lease needs an
	// ordinary connection of its own, held for as long as the lease,
	// directly to the server: a pooler in transaction mode would move
	// the session's lock between clients.
	ConnString    string
	ConfigureConn func(ctx context.Context, c *pgconn.Config) error
	// Slot is the replication slot the lease guards, Run's Config.Slot.
	// Required. The lock's key is LeaseKey(Slot).
	Slot string
	// Timeout bounds how long a holder that stopped renewing the lease
	// (frozen by SIGSTOP, a long pause, cut off from the database) keeps
	// it: the server ends its session that long after its last renewal
	// (idle_session_timeout), and the holder itself reports the lease
	// lost once it sees that much time passed since its last renewal.
	// The holder renews every Timeout/4. Default DefaultLeaseTimeout; at
	// least one second.
	Timeout time.Duration
	// Holder names this process to the others, as the lease session's
	// application_name (at most 63 bytes): a waiting process logs it.
	// Default "kafkasink-lease <process id>@<host name>".
	Holder string
	// Logger receives what the lease does: waiting and for whom,
	// acquired, the slot's walsender terminated, lost. Nil discards.
	Logger *slog.Logger
}

// LeaseKey returns the key of the advisory lock that is the lease of slot:
// the 64-bit FNV-1a hash of "kafkasink.pgcdc.lease:" followed by slot,
// read as a two's complement signed integer. The lock is taken in the database
// the connection string names (advisory locks are per database, and a
// logical slot belongs to one database), so the key and the database
// together name the lease. In pg_locks it is the row with locktype
// 'advisory', objsubid 1, classid the key's upper 32 bits and objid its
// lower 32 bits.
func LeaseKey(slot string) int64 {
	h := fnv.New64a()
	h.Write([]byte("kafkasink.pgcdc.lease:" + slot))
	return int64(h.Sum64())
}

// Lease is the right to stream one slot: a session-level advisory lock
// held on a dedicated connection, renewed by a short query every
// Timeout/4. AcquireLease returns a held Lease; it ends lost (see
// ErrLeaseLost) or released (Release), never held again. Its methods are
// safe for concurrent use.
type Lease struct {
	cfg  LeaseConfig
	conn *pgx.Conn
	log  *slog.Logger
	// renewed is when the last successful renewal was sent: the server
	// started its idle timer after that, so a holder that counts from it
	// gives up no later than the server does. Guarded by mu: Check reads
	// it beside the renewal loop.
	renewed time.Time

	stop     context.CancelFunc // ends the renewal
	ctx      context.Context    // the renewal's
	renewing sync.WaitGroup

	mu     sync.Mutex
	state  leaseState
	err    error
	ended  chan struct{}
	closed sync.Once // the connection
}

// leaseState is where a Lease is; its transitions are in end.
type leaseState int

const (
	leaseHeld     leaseState = iota
	leaseLost                // the session ended or was not renewed in time; err says how
	leaseReleased            // Release was called
)

// AcquireLease blocks until this process holds the lease of cfg.Slot, or
// ctx ends. A process that streams a slot only while it holds its lease
// never competes with a replica started with the same configuration: the
// replicas wait in turn, each logging who holds the lease (its Holder,
// backend pid and client address), and one of them takes over within
// about cfg.Timeout when the holder dies, freezes or is cut off.
//
// Once it holds the lease it makes sure the slot is free: a walsender
// still streaming the slot belongs to a former holder (frozen, or cut off
// before the server noticed), and the server would keep it until its
// wal_sender_timeout (60s by default), so it terminates it with
// pg_terminate_backend. That needs the same role as the walsender's, or
// membership in pg_signal_backend (superuser for a superuser's
// walsender); without it AcquireLease logs a warning naming the fix and
// Run waits for wal_sender_timeout, retrying.
//
// Lost errors of the connection (refused, reset, the server restarting)
// while waiting are retried with backoff; AcquireLease returns a
// *kafkasink.ConfigError for an invalid cfg or a server older than
// PostgreSQL 14 (which lacks idle_session_timeout, so a frozen holder
// would keep the lease for ever), errors no retry cures (authentication),
// and context.Cause(ctx) wrapped when ctx ends.
//
// The holder must stop streaming, and stop writing to its sink, when
// Lost is closed; kafkasink's fencing keeps a holder that does not from
// committing anything after the next holder's kafkasink.New.
func AcquireLease(ctx context.Context, cfg LeaseConfig) (*Lease, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("slot", cfg.Slot)
	wait := backoff.New(DefaultReconnectBackoff, cfg.Timeout)
	for {
		l, err := acquire(ctx, cfg, log)
		if err == nil {
			l.renew()
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pgcdc: waiting for the lease of slot %q: %w (%w)", cfg.Slot, context.Cause(ctx), err)
		}
		if !retryable(err) {
			return nil, err
		}
		log.Warn("waiting for the lease failed; trying again", "error", err, "backoff", wait.Delay())
		if !wait.Wait(ctx) {
			return nil, fmt.Errorf("pgcdc: waiting for the lease of slot %q: %w (the last attempt: %w)", cfg.Slot, context.Cause(ctx), err)
		}
	}
}

func (cfg LeaseConfig) withDefaults() LeaseConfig {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultLeaseTimeout
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		// The process id first: a long host name is cut at 63 bytes.
		cfg.Holder = "kafkasink-lease " + strconv.Itoa(os.Getpid()) + "@" + host
	}
	if len(cfg.Holder) > 63 {
		// The server would cut it there too; do it here so that the
		// name logged is the name others see.
		cfg.Holder = cfg.Holder[:63]
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Validate checks cfg as AcquireLease does before it connects: it
// returns every problem at once as one *kafkasink.ConfigError, or nil.
func (cfg LeaseConfig) Validate() error {
	return cfg.withDefaults().validate()
}

func (cfg LeaseConfig) validate() error {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, "pgcdc: "+fmt.Sprintf(format, args...))
	}
	if cfg.ConnString == "" {
		add("LeaseConfig.ConnString is required: Run's Config.ConnString")
	} else if _, err := pgconn.ParseConfig(cfg.ConnString); err != nil {
		add("LeaseConfig.ConnString does not parse: %v", err)
	}
	if !validSlotName(cfg.Slot) {
		add("LeaseConfig.Slot %q is not a valid replication slot name: use Run's Config.Slot", cfg.Slot)
	}
	if cfg.Timeout < time.Second {
		add("LeaseConfig.Timeout %v is below one second (the program's -lease-timeout): renewals every Timeout/4 would load the server, and a short pause would lose the lease", cfg.Timeout)
	}
	if problems != nil {
		return &kafkasink.ConfigError{Problems: problems}
	}
	return nil
}

// leaseSettings are the session settings of the lease connection, for
// PostgreSQL version (server_version_num): they make the server end the
// session, and with it the lock, within timeout of a holder that stopped
// renewing, and keep it from ending the session of a healthy one or the
// wait of a healthy waiter. An error means the server cannot bound it.
func leaseSettings(version int, timeout time.Duration) ([][2]string, error) {
	if version < 140000 {
		return nil, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: the lease needs PostgreSQL 14 or later (server_version_num %d): before 14 there is no idle_session_timeout, so a frozen holder would keep the lease for ever; upgrade, or run a single instance without a lease (the program's -ha=false)", version)}}
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	// TCP keepalives find a holder or waiter whose host vanished (no
	// reset arrives) within about timeout/2 + 3 probes of a second.
	idle := max(timeout/2, time.Second)
	return [][2]string{
		// The lease's own bound: a holder idle longer than this, which a
		// renewing one never is, loses its session and the lock.
		{"idle_session_timeout", ms(timeout)},
		// A role's or database's timeouts must not cut the wait for the
		// lock, or a renewal.
		{"statement_timeout", "0"},
		{"lock_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
		// A waiter that died is noticed while it waits, instead of
		// taking the lock for a moment once it is granted.
		{"client_connection_check_interval", "1000"},
		{"tcp_keepalives_idle", strconv.Itoa(int(idle.Seconds()))},
		{"tcp_keepalives_interval", "1"},
		{"tcp_keepalives_count", "3"},
		{"tcp_user_timeout", ms(timeout)},
	}, nil
}

// acquire connects, waits for the lock and frees the slot.
func acquire(ctx context.Context, cfg LeaseConfig, log *slog.Logger) (*Lease, error) {
	c := Config{ConnString: cfg.ConnString, ConfigureConn: cfg.ConfigureConn}
	cc, err := c.connConfig(ctx)
	if err != nil {
		return nil, err
	}
	cc.RuntimeParams["application_name"] = cfg.Holder
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: lease connection: %w", err)
	}
	l := &Lease{cfg: cfg, conn: conn, log: log, ended: make(chan struct{})}
	if err := l.lock(ctx); err != nil {
		closeConn(conn)
		return nil, err
	}
	return l, nil
}

// lock prepares the session, takes the lock, waiting for it when another
// session holds it, and frees the slot.
func (l *Lease) lock(ctx context.Context) error {
	var version int
	if err := l.conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("pgcdc: lease: reading the server's version: %w", err)
	}
	settings, err := leaseSettings(version, l.cfg.Timeout)
	if err != nil {
		return err
	}
	for _, s := range settings {
		if _, err := l.conn.Exec(ctx, "SELECT set_config($1, $2, false)", s[0], s[1]); err != nil {
			return fmt.Errorf("pgcdc: lease: setting %s: %w", s[0], err)
		}
	}
	key := LeaseKey(l.cfg.Slot)
	var got bool
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
		return fmt.Errorf("pgcdc: lease: pg_try_advisory_lock(%d): %w", key, err)
	}
	if !got {
		holder, err := l.holder(ctx, key)
		if err != nil {
			return err
		}
		start := time.Now()
		l.log.Info("waiting for the lease: another instance streams the slot", append(holder.attrs(), "lease_key", key)...)
		if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			return fmt.Errorf("pgcdc: lease: waiting in pg_advisory_lock(%d): %w", key, err)
		}
		l.log.Info("the lease is free", "waited", time.Since(start).Round(time.Millisecond))
	}
	l.renewed = time.Now()
	if err := l.freeSlot(ctx); err != nil {
		return err
	}
	l.log.Info("lease acquired", "holder", l.cfg.Holder, "lease_key", key, "timeout", l.cfg.Timeout)
	return nil
}

// leaseHolder is the session that holds a lease, as pg_locks and
// pg_stat_activity show it.
type leaseHolder struct {
	pid     *int32
	app     string
	client  string
	started *time.Time
}

func (h leaseHolder) attrs() []any {
	if h.pid == nil {
		// Released between the two queries: the wait ends at once.
		return []any{"holder", "none (just released)"}
	}
	attrs := []any{"holder", h.app, "holder_pid", *h.pid, "holder_client", h.client}
	if h.started != nil {
		attrs = append(attrs, "holder_since", h.started.UTC().Format(time.RFC3339))
	}
	return attrs
}

// holder looks up who holds the lock key in this database. Without
// pg_read_all_stats a role sees the application name and client of its
// own sessions only; the pid it always sees.
func (l *Lease) holder(ctx context.Context, key int64) (leaseHolder, error) {
	var h leaseHolder
	err := l.conn.QueryRow(ctx, `SELECT l.pid, coalesce(a.application_name, ''),
			coalesce(host(a.client_addr) || ':' || a.client_port, 'local socket'), a.backend_start
		FROM (SELECT 1) one LEFT JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid
		LEFT JOIN pg_stat_activity a ON a.pid = l.pid`,
		int64(uint64(key)>>32), int64(uint32(key))).Scan(&h.pid, &h.app, &h.client, &h.started)
	if err != nil {
		return h, fmt.Errorf("pgcdc: lease: looking up who holds it in pg_locks: %w", err)
	}
	return h, nil
}

// freeSlot terminates a walsender that still streams the slot: with the
// lease held, it belongs to a former holder.
func (l *Lease) freeSlot(ctx context.Context) error {
	var (
		pid         int32
		app, client string
	)
	err := l.conn.QueryRow(ctx, `SELECT s.active_pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local socket')
		FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1 AND s.active_pid IS NOT NULL`, l.cfg.Slot).Scan(&pid, &app, &client)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcdc: lease: looking up the walsender of slot %q: %w", l.cfg.Slot, err)
	}
	attrs := []any{"walsender_pid", pid, "walsender_application", app, "walsender_client", client}
	_, err = l.conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	if isPgCode(err, "42501") {
		var timeout string
		l.conn.QueryRow(ctx, "SELECT current_setting('wal_sender_timeout')").Scan(&timeout)
		l.log.Warn("a former holder's walsender still streams the slot, and this role may not terminate it: "+
			"the slot is free when the server's wal_sender_timeout ends it; to take over at once, connect as the walsender's role "+
			"or GRANT pg_signal_backend TO this role", append(attrs, "wal_sender_timeout", timeout, "error", err)...)
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcdc: lease: terminating walsender %d of slot %q: %w", pid, l.cfg.Slot, err)
	}
	l.log.Warn("terminated the walsender of a former holder, which still streamed the slot", attrs...)
	return nil
}

// isPgCode reports whether err is a server error with SQLSTATE code.
func isPgCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// renew starts renewing the lease.
func (l *Lease) renew() {
	l.ctx, l.stop = context.WithCancel(context.Background())
	l.renewing.Go(l.renewLoop)
}

// renewal is what the renewal loop does at a tick.
type renewal int

const (
	renewNow     renewal = iota
	renewTooLate         // the server has ended the session by now
)

// planRenewal decides what to do at now, the last renewal sent at renewed:
// past timeout the server has ended the session (idle_session_timeout
// counts from a moment after renewed), and another process may hold the
// lock; asking the server would only say so later.
func planRenewal(renewed, now time.Time, timeout time.Duration) renewal {
	if now.Sub(renewed) >= timeout {
		return renewTooLate
	}
	return renewNow
}

func (l *Lease) renewLoop() {
	t := time.NewTicker(l.cfg.Timeout / 4)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		if l.renewOnce() != nil {
			return
		}
	}
}

// renewOnce renews the lease, or ends it lost and returns why.
func (l *Lease) renewOnce() error {
	now, renewed := time.Now(), l.lastRenewed()
	if planRenewal(renewed, now, l.cfg.Timeout) == renewTooLate {
		return l.lose(l.tooLate(now, renewed, "its Timeout", "so the server has ended its session"))
	}
	// The renewal must answer before the server could end the session.
	ctx, cancel := context.WithDeadline(l.ctx, renewed.Add(l.cfg.Timeout))
	defer cancel()
	if _, err := l.conn.Exec(ctx, "SELECT 1"); err != nil {
		if l.ctx.Err() != nil {
			return err // released
		}
		return l.lose(fmt.Errorf("%w: slot %q: renewing it failed, its session is gone: %w", ErrLeaseLost, l.cfg.Slot, err))
	}
	l.mu.Lock()
	l.renewed = now
	l.mu.Unlock()
	return nil
}

func (l *Lease) lastRenewed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// tooLate is the loss of a lease last renewed at renewed, seen at now
// past limit (a part of Timeout, named).
func (l *Lease) tooLate(now, renewed time.Time, limit, consequence string) error {
	return fmt.Errorf("%w: slot %q: the lease was last renewed %v ago, more than %s %v (this process was frozen or cut off), %s",
		ErrLeaseLost, l.cfg.Slot, now.Sub(renewed).Round(time.Millisecond), limit, l.cfg.Timeout, consequence)
}

// Check returns nil while this process may act as the holder: the lease
// is held, and its last renewal is recent enough that the server cannot
// be about to end its session. Otherwise it returns the loss Err gives,
// ending the lease lost first when it was still held. It judges from the
// clock, not from the renewal loop, so a process resumed after a freeze
// longer than its margin sees the loss on its first call, whatever its
// goroutines run first. The margin is a quarter of Timeout (three
// renewals' worth are allowed to pass), so that a request sent right after
// Check succeeds still reaches the server before the session could end.
//
// Give it to kafkasink.Config.Guard: the sink then asks it before every
// request that could touch the transaction of an instance that took over
// (beginning, committing and aborting a transaction, and re-initialising
// its producer id, which would abort the new holder's open transaction),
// and stops as fenced instead.
func (l *Lease) Check() error {
	if err := l.Err(); err != nil {
		return err
	}
	now, renewed := time.Now(), l.lastRenewed()
	if planRenewal(renewed, now, l.cfg.Timeout*3/4) == renewTooLate {
		return l.lose(l.tooLate(now, renewed, "three quarters of its Timeout", "so the server may end its session before a request sent now arrives"))
	}
	return nil
}

// lose ends a held lease lost, and returns err.
func (l *Lease) lose(err error) error {
	l.end(leaseLost, err)
	return err
}

// end moves a held lease to state, once, logging a loss before Lost is
// closed, so that whoever reacts to Lost finds it logged.
func (l *Lease) end(state leaseState, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != leaseHeld {
		return
	}
	if state == leaseLost {
		l.log.Error("lease lost", "error", err)
	}
	l.state, l.err = state, err
	close(l.ended)
}

// Lost is closed when the lease is no longer held: lost, or released by
// Release. Err says which.
func (l *Lease) Lost() <-chan struct{} { return l.ended }

// Err is nil while the lease is held, an error wrapping ErrLeaseLost
// that says how once it was lost, and ErrLeaseReleased after Release.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops renewing the lease and closes its session, which frees
// the lock at once for the next process. It may be called more than once,
// and after the lease was lost (Err keeps the loss then).
func (l *Lease) Release() {
	if l.stop != nil {
		l.stop()
	}
	l.renewing.Wait()
	l.end(leaseReleased, ErrLeaseReleased)
	l.closed.Do(func() { closeConn(l.conn) })
}
