package pgcdc

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// Decoding on a hot standby (PostgreSQL 16 and later): Run connects to a
// standby as to a primary, and creates or uses its slot there. What
// differs is checked here, before anything else: the version, and
// hot_standby_feedback, without which the primary's vacuum removes
// catalog rows the slot still needs and the standby invalidates the slot
// (pg_replication_slots.conflicting), which Run refuses as any
// invalidated slot. See docs/postgresql-failover.md.

// serverRole is what checkServerRole found: a primary or a standby.
type serverRole struct {
	standby bool
	// slotName is the standby's primary_slot_name: without a physical
	// slot on the primary, the standby's feedback does not outlive its
	// connection to the primary.
	slotName string
}

// checkServerRole reads whether the server is a standby and refuses one
// that cannot decode: before PostgreSQL 16, or with hot_standby_feedback
// off. version is server_version_num.
func checkServerRole(ctx context.Context, db *pgx.Conn, version int) (serverRole, error) {
	var role serverRole
	var feedback string
	err := db.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('hot_standby_feedback'), current_setting('primary_slot_name')").
		Scan(&role.standby, &feedback, &role.slotName)
	if err != nil {
		return serverRole{}, fmt.Errorf("pgcdc: reading whether the server is a standby: %w", err)
	}
	if !role.standby {
		return role, nil
	}
	if version < 160000 {
		return serverRole{}, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: the server is a standby (in recovery) running PostgreSQL %d, which cannot decode logically on a standby: "+
				"PostgreSQL 16 can; connect Config.ConnString (-pg) to the primary, or upgrade the standby", version/10000)}}
	}
	if feedback != "on" {
		return serverRole{}, &kafkasink.ConfigError{Problems: []string{
			"pgcdc: the server is a standby with hot_standby_feedback = off: the primary's vacuum would remove catalog rows the slot needs, " +
				"and the standby would invalidate the slot (conflicting), losing its changes; " +
				"set hot_standby_feedback = on on the standby (ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf()), " +
				"with a physical slot on the primary (primary_slot_name), or connect to the primary"}}
	}
	return role, nil
}

// logStandby says what Run found on a standby, once at start-up.
func (r *runner) logStandby(role serverRole) {
	if !role.standby {
		return
	}
	if role.slotName == "" {
		r.log.Warn("decoding on a standby without primary_slot_name: while the standby is disconnected from the primary, " +
			"the primary's vacuum may remove catalog rows the slot needs and the standby then invalidates the slot; " +
			"stream the standby through a physical slot on the primary (primary_slot_name)")
	}
	r.log.Info("decoding on a standby: creating a slot there waits for the primary's next running-transactions record " +
		"(every 15 seconds while the primary is busy; SELECT pg_log_standby_snapshot() on the primary writes one at once); " +
		"heartbeats are not emitted on a standby, which is read-only")
}
