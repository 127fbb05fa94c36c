package sinktest

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// DropSlot drops the replication slot, ending a walsender still holding
// it, and tries again for up to 20 seconds (within ctx): the walsender of
// a stopped program may not have let it go yet. It is for cleanups on the
// shared server; it reports nothing.
func DropSlot(ctx context.Context, db *pgx.Conn, slot string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, err := db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		if err == nil {
			_, err = db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		}
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
