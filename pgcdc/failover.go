package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// Failover slots (PostgreSQL 17 and later): Run makes its slot a failover
// slot on a primary (Config.NoFailoverSlot), checks the settings a
// failover to a standby depends on, and, given Config.FailoverStandby,
// watches the standby's synchronised copy of the slot for the Monitor.
// After a failover, Config.ConnString must reach the promoted standby (a
// multi-host string with target_session_attrs=read-write, or a name that
// moves): Run reconnects as after any lost connection and resumes from
// the synchronised slot. See docs/postgresql-failover.md.

// StandbySync is what Run last read on Config.FailoverStandby of the
// slot's synchronised copy.
type StandbySync struct {
	// Checked is when it was read; zero before the first reading, and
	// without Config.FailoverStandby.
	Checked time.Time
	// Synced is true when the standby holds a copy of the slot that the
	// slot sync worker keeps (pg_replication_slots.synced) and that is
	// not invalidated: a failover to this standby now loses nothing of
	// the slot's.
	Synced bool
	// Confirmed is the copy's confirmed_flush_lsn: where Run resumes
	// after a failover to the standby (changes delivered past it are
	// skipped by the sink's checkpoint).
	Confirmed kafkasink.LSN
	// Problem says why Synced is false, or what the last reading failed
	// on; empty when Synced.
	Problem string
}

// failoverSettingsQuery reads, on a PostgreSQL 17+ primary,
// synchronized_standby_slots and whether any physical slot (a standby's)
// exists.
const failoverSettingsQuery = `SELECT current_setting('synchronized_standby_slots'),
	EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_type = 'physical')`

// checkFailoverSettings is the pre-flight of failover slots on a
// PostgreSQL 17 or later primary: it reports synchronized_standby_slots,
// with a warning naming what it risks when it is empty while the primary
// has standbys (a physical slot, or Config.FailoverStandby), and checks
// Config.FailoverStandby's settings. Nothing it finds stops Run: the
// primary streams correctly either way; the warnings say what a failover
// would do.
func (r *runner) checkFailoverSettings(ctx context.Context, db *pgx.Conn, role serverRole) error {
	if r.cfg.NoFailoverSlot || r.version < 170000 || role.standby {
		if r.cfg.FailoverStandby != "" {
			r.log.Warn("Config.FailoverStandby is set but the slot is no failover slot here (Config.NoFailoverSlot, a server before PostgreSQL 17, or a standby): the standby holds no copy of it",
				"server_version_num", r.version, "standby", role.standby)
		}
		return nil
	}
	var synchronized string
	var standbys bool
	if err := db.QueryRow(ctx, failoverSettingsQuery).Scan(&synchronized, &standbys); err != nil {
		return fmt.Errorf("pgcdc: reading synchronized_standby_slots: %w", err)
	}
	listed := splitSettingList(synchronized)
	switch {
	case len(listed) > 0:
		r.log.Info("failover slot: the primary holds changes back until these standbys have them", "synchronized_standby_slots", listed)
	case standbys || r.cfg.FailoverStandby != "":
		r.log.Warn("the primary's synchronized_standby_slots is empty: Kafka may receive changes a standby has not, " +
			"and after a failover to that standby they are not on the new primary; list the standbys' physical slots in it " +
			"(ALTER SYSTEM SET synchronized_standby_slots = 'slot'; SELECT pg_reload_conf())")
	default:
		r.log.Info("failover slot: the primary has no standby with a physical slot and synchronized_standby_slots is empty")
	}
	if r.cfg.FailoverStandby == "" {
		return nil
	}
	problems, err := r.checkStandbySettings(ctx, listed)
	if err != nil {
		r.log.Warn("could not check Config.FailoverStandby's settings; the Monitor reports what it reads there (RunStats.StandbySync)", "error", err)
		return nil
	}
	for _, p := range problems {
		r.log.Warn("Config.FailoverStandby: "+p, "standby", standbyName(r.cfg.FailoverStandby))
	}
	return nil
}

// checkStandbySettings connects to Config.FailoverStandby and returns
// what keeps it from holding a copy of the slot that a failover can use.
// listed is the primary's synchronized_standby_slots.
func (r *runner) checkStandbySettings(ctx context.Context, listed []string) ([]string, error) {
	db, err := r.connectStandby(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn(db)
	var recovery bool
	var sync, feedback, slot string
	err = db.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('sync_replication_slots'), current_setting('hot_standby_feedback'), current_setting('primary_slot_name')").
		Scan(&recovery, &sync, &feedback, &slot)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: reading the failover standby's settings: %w", err)
	}
	var problems []string
	if !recovery {
		problems = append(problems, "it is not a standby (not in recovery): give the connection string of a standby of the primary")
	}
	if sync != "on" {
		problems = append(problems, "sync_replication_slots is off: the standby keeps no copy of failover slots; set it on (and hot_standby_feedback, primary_slot_name, and dbname in primary_conninfo)")
	}
	if feedback != "on" {
		problems = append(problems, "hot_standby_feedback is off: slot synchronisation needs it on")
	}
	switch {
	case slot == "":
		problems = append(problems, "primary_slot_name is empty: slot synchronisation needs the standby to stream through a physical slot")
	case !slices.Contains(listed, slot):
		problems = append(problems, fmt.Sprintf("its physical slot %q is not in the primary's synchronized_standby_slots: Kafka may receive changes this standby has not", slot))
	}
	return problems, nil
}

// connectStandby opens an ordinary connection to Config.FailoverStandby,
// configured as every connection of Run is (Config.ConfigureConn).
func (r *runner) connectStandby(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ParseConfig(r.cfg.FailoverStandby)
	if err != nil {
		return nil, err
	}
	if err := r.cfg.configure(ctx, &c.Config, ""); err != nil {
		return nil, err
	}
	db, err := pgx.ConnectConfig(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: connecting to Config.FailoverStandby: %w", err)
	}
	return db, nil
}

// ensureFailoverSlot makes the slot a failover slot on a PostgreSQL 17 or
// later primary, unless Config.NoFailoverSlot, and notes in the Monitor
// whether it is one. It runs on every attempt: after a failover, the
// new primary's slot (the synchronised copy) is one already.
func (r *runner) ensureFailoverSlot(ctx context.Context, db *pgx.Conn) error {
	if r.version < 170000 {
		return nil
	}
	var recovery, failover bool
	err := db.QueryRow(ctx, "SELECT pg_is_in_recovery(), coalesce((SELECT failover FROM pg_replication_slots WHERE slot_name = $1), false)", r.cfg.Slot).
		Scan(&recovery, &failover)
	if err != nil {
		return fmt.Errorf("pgcdc: reading whether slot %q is a failover slot: %w", r.cfg.Slot, err)
	}
	if failover || recovery || r.cfg.NoFailoverSlot {
		r.cfg.Monitor.failoverSlot(failover)
		return nil
	}
	conn, err := r.cfg.connectReplication(ctx)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	// The slot name is validated: it needs no quoting.
	if _, err := conn.Exec(ctx, "ALTER_REPLICATION_SLOT "+r.cfg.Slot+" (FAILOVER true)").ReadAll(); err != nil {
		return fmt.Errorf("pgcdc: making slot %q a failover slot (set Config.NoFailoverSlot, -failover-slot=false, to leave it as it is): %w", r.cfg.Slot, err)
	}
	r.log.Info("made the slot a failover slot: a standby with sync_replication_slots = on keeps a copy of it")
	r.cfg.Monitor.failoverSlot(true)
	return nil
}

// watchStandby reads, every StandbyInterval until ctx ends, the slot's
// copy on Config.FailoverStandby into the Monitor. Failures are
// reported there and retried.
func (r *runner) watchStandby(ctx context.Context) {
	t := time.NewTicker(r.cfg.StandbyInterval)
	defer t.Stop()
	var db *pgx.Conn
	defer func() {
		if db != nil {
			closeConn(db)
		}
	}()
	for {
		var err error
		if db == nil {
			db, err = r.connectStandby(ctx)
		}
		var st StandbySync
		if err == nil {
			st, err = readStandbySync(ctx, db, r.cfg.Slot)
		}
		if err != nil {
			if db != nil {
				closeConn(db)
				db = nil
			}
			st = StandbySync{Problem: err.Error()}
		}
		st.Checked = time.Now()
		r.cfg.Monitor.standbySync(st)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readStandbySync reads the slot's copy on a standby.
func readStandbySync(ctx context.Context, db *pgx.Conn, slot string) (StandbySync, error) {
	var (
		found, synced, valid bool
		confirmed            *string
	)
	err := db.QueryRow(ctx, `SELECT s.slot_name IS NOT NULL, coalesce(s.synced, false),
			coalesce(NOT s.conflicting AND s.invalidation_reason IS NULL, false), s.confirmed_flush_lsn::text
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).Scan(&found, &synced, &valid, &confirmed)
	if err != nil {
		return StandbySync{}, fmt.Errorf("pgcdc: reading slot %q on Config.FailoverStandby: %w", slot, err)
	}
	var st StandbySync
	if confirmed != nil {
		if st.Confirmed, err = kafkasink.ParseLSN(*confirmed); err != nil {
			return StandbySync{}, fmt.Errorf("pgcdc: slot %q on Config.FailoverStandby: confirmed_flush_lsn: %w", slot, err)
		}
	}
	switch {
	case !found:
		st.Problem = "the standby has no copy of the slot (yet): is it a failover slot, and sync_replication_slots on on the standby?"
	case !synced:
		st.Problem = "the standby's slot of that name is its own, not a synchronised copy"
	case !valid:
		st.Problem = "the standby's copy of the slot is invalidated"
	default:
		st.Synced = true
	}
	return st, nil
}

// splitSettingList splits a list setting such as
// synchronized_standby_slots ("a, b") into its names.
func splitSettingList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.Trim(strings.TrimSpace(s), `"`); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// standbyName is where Config.FailoverStandby points, for logs: host and
// port, never the password.
func standbyName(conn string) string {
	c, err := pgx.ParseConfig(conn)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", c.Host, c.Port)
}
