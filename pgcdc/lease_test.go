package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// leaseEnv is a lease test's database: a connection for the test's own
// queries and a slot name no other test uses.
type leaseEnv struct {
	t    *testing.T
	pg   string
	db   *pgx.Conn
	slot string
}

func newLeaseEnv(t *testing.T) *leaseEnv {
	t.Helper()
	pg := sinktest.RealPG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", sinktest.EnvPG, err)
	}
	e := &leaseEnv{t: t, pg: pg, db: db, slot: fmt.Sprintf("pgcdc_lease_%06d", rand.IntN(1e6))}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dropTestObjects(ctx, db, e.slot)
		db.Close(ctx)
	})
	return e
}

// config is a LeaseConfig for holder, logging into log.
func (e *leaseEnv) config(holder string, timeout time.Duration, log *sinktest.SyncBuffer) LeaseConfig {
	return LeaseConfig{ConnString: e.pg, Slot: e.slot, Timeout: timeout, Holder: holder,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// acquired is the outcome of an AcquireLease started in the background.
type acquired struct {
	lease *Lease
	err   error
	at    time.Time
}

func acquireAsync(ctx context.Context, cfg LeaseConfig) chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := AcquireLease(ctx, cfg)
		ch <- acquired{l, err, time.Now()}
	}()
	return ch
}

// waitAcquired waits up to within for the background AcquireLease.
func waitAcquired(t *testing.T, ch chan acquired, within time.Duration, what string) acquired {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		t.Cleanup(a.lease.Release)
		return a
	case <-time.After(within):
		t.Fatalf("%s: not acquired within %v", what, within)
	}
	return acquired{}
}

// notAcquired checks that the background AcquireLease still waits after wait.
func notAcquired(t *testing.T, ch chan acquired, wait time.Duration, why string) {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("AcquireLease returned %v %s, want it waiting", a.err, why)
		}
		a.lease.Release()
		t.Fatalf("a second lease was acquired %s", why)
	case <-time.After(wait):
	}
}

// backendPID returns the pid of the session whose application_name is
// holder.
func (e *leaseEnv) backendPID(holder string) int32 {
	e.t.Helper()
	var pid int32
	if err := e.db.QueryRow(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", holder).Scan(&pid); err != nil {
		e.t.Fatalf("finding the session of %s: %v", holder, err)
	}
	return pid
}

// TestLeaseWaitsForRelease holds a lease with a one-second timeout for
// three seconds, renewing it: a second AcquireLease on the same slot
// waits all along, logging who holds it, and acquires it as soon as the
// first is released. Without the lock the second would not wait; without
// the renewals the server would end the first's idle session after a
// second.
func TestLeaseWaitsForRelease(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	a, err := AcquireLease(ctx, e.config("lease-test-a", time.Second, &logA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b := acquireAsync(ctx, e.config("lease-test-b", time.Second, &logB))
	notAcquired(t, b, 3*time.Second, "while the first was held and renewed")
	if s := logB.String(); !strings.Contains(s, "waiting for the lease") || !strings.Contains(s, "holder=lease-test-a") {
		t.Errorf("the waiting process did not log that it waits for lease-test-a:\n%s", s)
	}
	select {
	case <-a.Lost():
		t.Fatalf("the held lease ended: %v", a.Err())
	default:
	}
	released := time.Now()
	a.Release()
	got := waitAcquired(t, b, 5*time.Second, "after the first was released")
	t.Logf("acquired %v after the release", got.at.Sub(released))
	select {
	case <-a.Lost():
	default:
		t.Fatal("Lost is open after Release")
	}
	if !errors.Is(a.Err(), ErrLeaseReleased) {
		t.Errorf("Err after Release: %v, want ErrLeaseReleased", a.Err())
	}
	if got.lease.Err() != nil {
		t.Errorf("Err of the held lease: %v", got.lease.Err())
	}
	a.Release() // twice is fine
}

// TestLeaseLostWithItsSession terminates the holder's session: a waiting
// AcquireLease takes the lease at once, and the former holder reports it
// lost at its next renewal, naming the failure.
func TestLeaseLostWithItsSession(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	const timeout = 2 * time.Second
	a, err := AcquireLease(ctx, e.config("lease-test-killed", timeout, &logA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b := acquireAsync(ctx, e.config("lease-test-next", timeout, &logB))
	notAcquired(t, b, time.Second, "while the first was held")
	killed := time.Now()
	if _, err := e.db.Exec(ctx, "SELECT pg_terminate_backend($1)", e.backendPID("lease-test-killed")); err != nil {
		t.Fatal(err)
	}
	got := waitAcquired(t, b, 5*time.Second, "after the holder's session was terminated")
	t.Logf("acquired %v after the holder's session was terminated", got.at.Sub(killed))
	select {
	case <-a.Lost():
	case <-time.After(timeout):
		t.Fatalf("the lease whose session was terminated is not lost %v later", timeout)
	}
	if err := a.Err(); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "renewing it failed") {
		t.Errorf("Err: %v, want ErrLeaseLost after a failed renewal", err)
	}
	if !strings.Contains(logA.String(), "lease lost") {
		t.Errorf("the loss was not logged:\n%s", logA.String())
	}
}

// TestLeaseWaitSurvivesALostConnection terminates the session of a
// waiting AcquireLease: it connects again and goes on waiting, and takes
// the lease when the holder releases it.
func TestLeaseWaitSurvivesALostConnection(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	a, err := AcquireLease(ctx, e.config("lease-test-holding", 2*time.Second, &logA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b := acquireAsync(ctx, e.config("lease-test-retrying", 2*time.Second, &logB))
	notAcquired(t, b, 500*time.Millisecond, "while the first was held")
	if _, err := e.db.Exec(ctx, "SELECT pg_terminate_backend($1)", e.backendPID("lease-test-retrying")); err != nil {
		t.Fatal(err)
	}
	notAcquired(t, b, 2*time.Second, "after the waiter's session was terminated, while the first was held")
	if s := logB.String(); strings.Count(s, "waiting for the lease: another instance") != 2 {
		t.Errorf("the waiter did not wait again after its session was terminated:\n%s", s)
	}
	a.Release()
	waitAcquired(t, b, 5*time.Second, "after the first was released")
}

// TestLeaseFrozenHolderExpires holds a lease that is never renewed, as a
// process stopped by SIGSTOP would: the server ends its session after
// the lease's timeout, a waiting AcquireLease takes the lease, and the
// holder, renewing at last as a resumed process does, reports it lost
// without asking the server. Without idle_session_timeout the waiter
// would wait for ever.
func TestLeaseFrozenHolderExpires(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	const timeout = 2 * time.Second
	cfg := e.config("lease-test-frozen", timeout, &logA).withDefaults()
	frozen, err := acquire(ctx, cfg, cfg.Logger) // no renewals
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Release()
	b := acquireAsync(ctx, e.config("lease-test-standby", timeout, &logB))
	const bound = timeout + 3*time.Second
	got := waitAcquired(t, b, bound, "from a holder that stopped renewing")
	waited := got.at.Sub(frozen.renewed)
	t.Logf("acquired %v after the frozen holder's last renewal (timeout %v)", waited, timeout)
	if waited < timeout {
		t.Errorf("acquired %v after the holder's last renewal, before its timeout %v", waited, timeout)
	}
	err = frozen.renewOnce()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "frozen or cut off") || !errors.Is(frozen.Err(), ErrLeaseLost) {
		t.Errorf("the resumed holder's renewal: %v (Err %v), want ErrLeaseLost saying it was frozen", err, frozen.Err())
	}
}

// startWalsender creates the slot and streams it from a client that reads
// nothing, as a frozen former holder would; it returns whether the slot
// is active.
func (e *leaseEnv) startWalsender(ctx context.Context) (active func() bool) {
	t := e.t
	t.Helper()
	if _, err := e.db.Exec(ctx, "CREATE PUBLICATION "+e.slot); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", e.slot); err != nil {
		t.Fatal(err)
	}
	rc, err := pgconn.Connect(ctx, e.pg+"&replication=database&application_name=lease-test-walsender")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeConn(rc) })
	if err := pglogrepl.StartReplication(ctx, rc, e.slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + e.slot + "'"}}); err != nil {
		t.Fatal(err)
	}
	active = func() bool {
		var active bool
		if err := e.db.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&active); err != nil {
			t.Fatal(err)
		}
		return active
	}
	if !active() {
		t.Fatal("the slot is not active after START_REPLICATION")
	}
	return active
}

// TestLeaseFreesTheSlot leaves a walsender streaming the slot from a
// client that reads nothing, as a frozen former holder's would:
// AcquireLease terminates it, so the slot is free at once instead of
// after wal_sender_timeout.
func TestLeaseFreesTheSlot(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	active := e.startWalsender(ctx)
	var log sinktest.SyncBuffer
	l, err := AcquireLease(ctx, e.config("lease-test-taker", 2*time.Second, &log))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	deadline := time.Now().Add(3 * time.Second)
	for active() {
		if time.Now().After(deadline) {
			t.Fatalf("the slot is still active 3s after AcquireLease:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := log.String(); !strings.Contains(s, "terminated the walsender") || !strings.Contains(s, "walsender_application=lease-test-walsender") {
		t.Errorf("the termination was not logged with whose walsender it was:\n%s", s)
	}
}

// TestLeaseWithoutTheRightToTerminate takes the lease as a role that may
// not terminate the slot's walsender (another role's, no
// pg_signal_backend): AcquireLease still succeeds, and warns naming the
// fix and wal_sender_timeout, after which the slot is free.
func TestLeaseWithoutTheRightToTerminate(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role, password := e.slot+"_role", fmt.Sprintf("pw%d", rand.Int64())
	if _, err := e.db.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.db.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		e.db.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	active := e.startWalsender(ctx)
	var log sinktest.SyncBuffer
	cfg := e.config("lease-test-unprivileged", 2*time.Second, &log)
	cfg.ConfigureConn = func(_ context.Context, c *pgconn.Config) error {
		c.User, c.Password = role, password
		return nil
	}
	l, err := AcquireLease(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if !active() {
		t.Error("the slot is free: the walsender was terminated by a role that should not be able to")
	}
	for _, want := range []string{"may not terminate it", "pg_signal_backend", "wal_sender_timeout=1min", "walsender_application=lease-test-walsender"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the warning does not say %q:\n%s", want, log.String())
		}
	}
}

// TestLeaseWaitEndsWithContext cancels a waiting AcquireLease: it returns
// the context's error at once, and leaves no session waiting for the lock.
func TestLeaseWaitEndsWithContext(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	a, err := AcquireLease(ctx, e.config("lease-test-holder", 2*time.Second, &logA))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	wctx, stop := context.WithCancel(ctx)
	b := acquireAsync(wctx, e.config("lease-test-waiter", 2*time.Second, &logB))
	notAcquired(t, b, 500*time.Millisecond, "while the first was held")
	stopped := time.Now()
	stop()
	select {
	case got := <-b:
		if !errors.Is(got.err, context.Canceled) {
			t.Fatalf("AcquireLease after its context was cancelled: %v, want context.Canceled", got.err)
		}
		t.Logf("returned %v after the cancellation", got.at.Sub(stopped))
	case <-time.After(3 * time.Second):
		t.Fatal("AcquireLease still waits 3s after its context was cancelled")
	}
	// pgx cancels the wait on the server too as it closes the
	// connection: the session ends at once instead of staying queued.
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		var waiting int
		if err := e.db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lease-test-waiter'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled waiter's session remains %v after AcquireLease returned", 300*time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaseConfigRefusals(t *testing.T) {
	t.Parallel()
	_, err := AcquireLease(context.Background(), LeaseConfig{Slot: "Bad-Name", Timeout: 10 * time.Millisecond})
	for _, want := range []string{"LeaseConfig.ConnString is required", `LeaseConfig.Slot "Bad-Name"`, "LeaseConfig.Timeout 10ms", "-lease-timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AcquireLease with an invalid config: %v, want it to say %q", err, want)
		}
	}
	if _, err := leaseSettings(130010, time.Second); err == nil || !strings.Contains(err.Error(), "PostgreSQL 14") {
		t.Errorf("leaseSettings on PostgreSQL 13: %v, want a refusal naming PostgreSQL 14", err)
	}
	settings, err := leaseSettings(150004, 10*time.Second)
	if err != nil || settings[0] != [2]string{"idle_session_timeout", "10000"} {
		t.Errorf("leaseSettings(15, 10s) = %v, %v; want idle_session_timeout 10000 first", settings, err)
	}
}

func TestPlanRenewal(t *testing.T) {
	t.Parallel()
	renewed := time.Unix(1000, 0)
	for _, tc := range []struct {
		after time.Duration
		want  renewal
	}{{0, renewNow}, {9 * time.Second, renewNow}, {10 * time.Second, renewTooLate}, {time.Hour, renewTooLate}} {
		if got := planRenewal(renewed, renewed.Add(tc.after), 10*time.Second); got != tc.want {
			t.Errorf("planRenewal %v after the last renewal, timeout 10s: %v, want %v", tc.after, got, tc.want)
		}
	}
}

// TestLeaseKey pins the key, which operators look up in pg_locks and
// which replicas of different versions must agree on.
func TestLeaseKey(t *testing.T) {
	t.Parallel()
	if got, want := LeaseKey("kafkasink"), LeaseKey("kafkasink"); got != want || got == LeaseKey("kafkasink2") {
		t.Fatalf("LeaseKey is not a function of the slot: %d %d", got, want)
	}
	if got := LeaseKey("kafkasink"); got != leaseKeyKafkasink {
		t.Errorf("LeaseKey(\"kafkasink\") = %d, want %d: the key changed, and replicas of different versions would not exclude each other", got, leaseKeyKafkasink)
	}
}

// leaseKeyKafkasink is LeaseKey("kafkasink"), computed apart from Go's
// hash/fnv (FNV-1a, 64 bits, by hand in Python).
const leaseKeyKafkasink = -59109474727373208

// TestLeaseCheck: Check passes while the lease is renewed, for longer
// than its Timeout; a holder that stopped renewing fails it once three
// quarters of Timeout have passed since its last renewal (before the
// server could end its session), and the lease is then lost.
func TestLeaseCheck(t *testing.T) {
	e := newLeaseEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logA, logB sinktest.SyncBuffer
	const timeout = 2 * time.Second

	renewed, err := AcquireLease(ctx, e.config("lease-test-check", timeout, &logA))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout + timeout/2)
	if err := renewed.Check(); err != nil {
		t.Errorf("Check of a renewed lease after %v: %v, want nil", timeout+timeout/2, err)
	}
	renewed.Release()
	if err := renewed.Check(); !errors.Is(err, ErrLeaseReleased) {
		t.Errorf("Check after Release: %v, want ErrLeaseReleased", err)
	}

	cfg := e.config("lease-test-check-frozen", timeout, &logB).withDefaults()
	frozen, err := acquire(ctx, cfg, cfg.Logger) // no renewals
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Release()
	if err := frozen.Check(); err != nil {
		t.Fatalf("Check right after acquiring: %v, want nil", err)
	}
	time.Sleep(timeout * 3 / 4)
	err = frozen.Check()
	if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "three quarters of its Timeout") {
		t.Fatalf("Check %v after the last renewal (Timeout %v): %v, want ErrLeaseLost", timeout*3/4, timeout, err)
	}
	select {
	case <-frozen.Lost():
	default:
		t.Error("Check found the lease lost, but Lost is not closed")
	}
}
