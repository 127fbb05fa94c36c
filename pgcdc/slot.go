package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// walLevelError explains a wal_level that does not allow logical decoding.
// It is a *kafkasink.ConfigError, so fatal: no retry can change it.
func walLevelError(level string) error {
	return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
		"pgcdc: the server's wal_level is %q, but logical replication needs wal_level = logical: "+
			"run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf) and restart PostgreSQL; "+
			"on Amazon RDS or Aurora set rds.logical_replication = 1 in the parameter group, "+
			"on Cloud SQL the flag cloudsql.logical_decoding = on", level)}}
}

// checkServer verifies wal_level and returns the server's version number
// (server_version_num, such as 150004).
func checkServer(ctx context.Context, db *pgx.Conn) (int, error) {
	var level, version string
	if err := db.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('server_version_num')").Scan(&level, &version); err != nil {
		return 0, fmt.Errorf("pgcdc: reading wal_level: %w", err)
	}
	if level != "logical" {
		return 0, walLevelError(level)
	}
	n, err := strconv.Atoi(version)
	if err != nil {
		return 0, fmt.Errorf("pgcdc: server_version_num %q is not a number", version)
	}
	return n, nil
}

// ensurePublication checks that the publication exists and creates it when
// allowed.
func ensurePublication(ctx context.Context, db *pgx.Conn, cfg *Config) error {
	var exists bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", cfg.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("pgcdc: looking up publication %q: %w", cfg.Publication, err)
	}
	if exists {
		return checkPublicationTables(ctx, db, cfg)
	}
	if !cfg.CreatePublication {
		return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: publication %q does not exist: create it (CREATE PUBLICATION %s FOR TABLE ...) or set Config.CreatePublication",
			cfg.Publication, pgx.Identifier{cfg.Publication}.Sanitize())}}
	}
	sql := "CREATE PUBLICATION " + pgx.Identifier{cfg.Publication}.Sanitize()
	if len(cfg.Tables) == 0 {
		sql += " FOR ALL TABLES"
	} else {
		names := make([]string, len(cfg.Tables))
		for i, t := range cfg.Tables {
			schema, table, _ := splitTable(t) // validated
			names[i] = qualified(schema, table)
		}
		sql += " FOR TABLE " + strings.Join(names, ", ")
	}
	if _, err := db.Exec(ctx, sql); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42710" {
			return nil // created meanwhile by someone else
		}
		return fmt.Errorf("pgcdc: %s: %w", sql, err)
	}
	cfg.Logger.Info("created publication", "publication", cfg.Publication, "tables", cfg.Tables)
	return nil
}

// slotState is what the server says about the replication slot.
type slotState struct {
	exists    bool
	confirmed kafkasink.LSN // confirmed_flush_lsn
	restart   kafkasink.LSN // restart_lsn: the oldest WAL the slot holds; 0 once invalidated
	// walStatus is pg_replication_slots.wal_status: reserved, extended,
	// unreserved or lost.
	walStatus string
	// conflicting is set on PostgreSQL 16 and later when the slot was
	// invalidated by a recovery conflict on a standby (rows_removed,
	// wal_level_insufficient), not when the server removed its WAL.
	conflicting bool
	// current is the server's current WAL position (on a standby, the
	// last replayed one), read with the slot.
	current kafkasink.LSN
}

// invalidated reports whether the slot can no longer stream.
func (s slotState) invalidated() bool { return s.walStatus == "lost" || s.conflicting }

// invalidation names the reason of invalidated.
func (s slotState) invalidation() string {
	if s.conflicting {
		return "conflicting = true: a recovery conflict on the standby removed rows the slot needed"
	}
	return "wal_status = 'lost'"
}

// retained is the WAL the slot holds back, in bytes.
func (s slotState) retained() int64 {
	if s.restart == 0 || s.current < s.restart {
		return 0
	}
	return int64(s.current - s.restart)
}

// readSlot looks the slot up and checks it is usable: logical, pgoutput,
// in the connection's database. version is server_version_num: the
// wal_status column came with PostgreSQL 13, conflicting with 16.
func readSlot(ctx context.Context, db *pgx.Conn, slot string, version int) (slotState, error) {
	var (
		plugin, typ, database *string
		confirmed, restart    *string
		walStatus             *string
		conflicting           *bool
		current, currentLSN   string
	)
	walStatusCol, conflictingCol := "NULL::text", "NULL::bool"
	if version >= 130000 {
		walStatusCol = "s.wal_status"
	}
	if version >= 160000 {
		// PostgreSQL 16 sets conflicting for every invalidated logical
		// slot, removed WAL included (17 only for recovery conflicts).
		// The server clears restart_lsn when it removes the slot's WAL
		// and keeps it for the other causes, so this tells them apart
		// on every version.
		conflictingCol = "(s.conflicting AND s.restart_lsn IS NOT NULL)"
	}
	const currentSQL = "(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text"
	err := db.QueryRow(ctx, `SELECT s.plugin, s.slot_type, s.database, s.confirmed_flush_lsn::text, s.restart_lsn::text, `+walStatusCol+`, `+conflictingCol+`,
			current_database(), `+currentSQL+`
		FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).Scan(
		&plugin, &typ, &database, &confirmed, &restart, &walStatus, &conflicting, &current, &currentLSN)
	if err != nil {
		return slotState{}, fmt.Errorf("pgcdc: looking up replication slot %q: %w", slot, err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	lsn := func(field string, p *string) (kafkasink.LSN, error) {
		if p == nil {
			return 0, nil
		}
		v, err := kafkasink.ParseLSN(*p)
		if err != nil {
			return 0, fmt.Errorf("pgcdc: replication slot %q: %s: %w", slot, field, err)
		}
		return v, nil
	}
	st := slotState{walStatus: str(walStatus), conflicting: conflicting != nil && *conflicting}
	if st.current, err = lsn("current WAL position", &currentLSN); err != nil {
		return slotState{}, err
	}
	if typ == nil {
		return st, nil // no such slot
	}
	switch {
	case str(typ) != "logical" || str(plugin) != "pgoutput":
		return slotState{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: replication slot %q is a %s slot with plugin %q; pgcdc needs a logical slot with plugin pgoutput: choose another Config.Slot", slot, str(typ), str(plugin))}}
	case str(database) != current:
		return slotState{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: replication slot %q belongs to database %q, not %q: connect to that database or choose another Config.Slot", slot, str(database), current)}}
	}
	st.exists = true
	if st.confirmed, err = lsn("confirmed_flush_lsn", confirmed); err != nil {
		return slotState{}, err
	}
	if st.restart, err = lsn("restart_lsn", restart); err != nil {
		return slotState{}, err
	}
	return st, nil
}

// identify returns the identity of the source: IDENTIFY_SYSTEM on a
// replication connection, the database's oid, and the slot's name.
func identify(ctx context.Context, cfg *Config, db *pgx.Conn) (sourceIdentity, error) {
	conn, err := cfg.connectReplication(ctx)
	if err != nil {
		return sourceIdentity{}, err
	}
	defer closeConn(conn)
	sys, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		return sourceIdentity{}, fmt.Errorf("pgcdc: IDENTIFY_SYSTEM: %w", err)
	}
	id := sourceIdentity{SystemID: sys.SystemID, Timeline: sys.Timeline, Database: sys.DBName, Slot: cfg.Slot}
	if err := db.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&id.DatabaseOID); err != nil {
		return sourceIdentity{}, fmt.Errorf("pgcdc: reading the database's oid: %w", err)
	}
	return id, nil
}

// dropReplicationSlot drops the slot, which must not be active.
func dropReplicationSlot(ctx context.Context, db *pgx.Conn, slot string) error {
	if _, err := db.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		return fmt.Errorf("pgcdc: dropping replication slot %q: %w", slot, err)
	}
	return nil
}

// createdSlot is a slot created by this Run. While conn stays open and
// idle, snapshot names a snapshot of the database exactly at consistent,
// where the slot's stream begins.
type createdSlot struct {
	conn       *pgconn.PgConn
	consistent kafkasink.LSN
	snapshot   string
}

// createSlot creates the slot, exporting its snapshot when export is set.
// The caller closes the returned connection once it no longer needs the
// snapshot. A slot created meanwhile by someone else is not an error: it
// returns nil, nil, and the caller uses the existing slot.
func createSlot(ctx context.Context, cfg *Config, export bool) (*createdSlot, error) {
	conn, err := cfg.connectReplication(ctx)
	if err != nil {
		return nil, err
	}
	action := "NOEXPORT_SNAPSHOT"
	if export {
		action = "EXPORT_SNAPSHOT"
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: action})
	if err != nil {
		closeConn(conn)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42710" {
			return nil, nil
		}
		return nil, fmt.Errorf("pgcdc: creating replication slot %q: %w", cfg.Slot, err)
	}
	lsn, err := kafkasink.ParseLSN(res.ConsistentPoint)
	if err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("pgcdc: creating replication slot %q: consistent point: %w", cfg.Slot, err)
	}
	cfg.Logger.Info("created replication slot", "slot", cfg.Slot, "consistent_point", lsn.String(), "snapshot", res.SnapshotName)
	return &createdSlot{conn: conn, consistent: lsn, snapshot: res.SnapshotName}, nil
}
