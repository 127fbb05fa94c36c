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
		return nil
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
}

// readSlot looks the slot up and checks it is usable: logical, pgoutput,
// in the connection's database.
func readSlot(ctx context.Context, db *pgx.Conn, slot string) (slotState, error) {
	var (
		plugin, typ, database *string
		confirmed             *string
		current               string
	)
	err := db.QueryRow(ctx, `SELECT s.plugin, s.slot_type, s.database, s.confirmed_flush_lsn::text, current_database()
		FROM pg_replication_slots s WHERE s.slot_name = $1`, slot).Scan(&plugin, &typ, &database, &confirmed, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}, nil
	}
	if err != nil {
		return slotState{}, fmt.Errorf("pgcdc: looking up replication slot %q: %w", slot, err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch {
	case str(typ) != "logical" || str(plugin) != "pgoutput":
		return slotState{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: replication slot %q is a %s slot with plugin %q; pgcdc needs a logical slot with plugin pgoutput: choose another Config.Slot", slot, str(typ), str(plugin))}}
	case str(database) != current:
		return slotState{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: replication slot %q belongs to database %q, not %q: connect to that database or choose another Config.Slot", slot, str(database), current)}}
	}
	st := slotState{exists: true}
	if confirmed != nil {
		lsn, err := kafkasink.ParseLSN(*confirmed)
		if err != nil {
			return slotState{}, fmt.Errorf("pgcdc: replication slot %q: confirmed_flush_lsn: %w", slot, err)
		}
		st.confirmed = lsn
	}
	return st, nil
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
	rc, err := cfg.replicationConfig()
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: replication connection: %w", err)
	}
	action := "NOEXPORT_SNAPSHOT"
	if export {
		action = "EXPORT_SNAPSHOT"
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: action})
	if err != nil {
		conn.Close(context.Background())
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42710" {
			return nil, nil
		}
		return nil, fmt.Errorf("pgcdc: creating replication slot %q: %w", cfg.Slot, err)
	}
	lsn, err := kafkasink.ParseLSN(res.ConsistentPoint)
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("pgcdc: creating replication slot %q: consistent point: %w", cfg.Slot, err)
	}
	cfg.Logger.Info("created replication slot", "slot", cfg.Slot, "consistent_point", lsn.String(), "snapshot", res.SnapshotName)
	return &createdSlot{conn: conn, consistent: lsn, snapshot: res.SnapshotName}, nil
}
