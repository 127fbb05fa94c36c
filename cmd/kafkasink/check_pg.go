package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// pgChecks runs the PostgreSQL checks on one ordinary connection, which
// reads the catalogue and settings only.
type pgChecks struct {
	t        checkTarget
	conn     *pgx.Conn
	findings []finding
}

func (c *pgChecks) add(f finding) {
	f.Area = "postgresql"
	c.findings = append(c.findings, f)
}

// checkPostgreSQL checks the server, the role, the slot, the publication
// and the tables of t.
func checkPostgreSQL(ctx context.Context, t checkTarget) []finding {
	c := &pgChecks{t: t}
	cc, err := pgx.ParseConfig(t.pcfg.ConnString)
	if err == nil && t.pcfg.ConfigureConn != nil {
		err = t.pcfg.ConfigureConn(ctx, &cc.Config)
	}
	if err == nil {
		c.conn, err = pgx.ConnectConfig(ctx, cc)
	}
	if err != nil {
		c.add(finding{Check: "connection", Status: statusFail, Detail: err.Error(),
			Fix: "check -pg (host, port, database, user), the password (-pg-password-file or $PGPASSWORD) and pg_hba.conf"})
		return c.findings
	}
	defer c.conn.Close(context.Background())
	for _, step := range []func(context.Context) error{c.settings, c.role, c.slot, c.publication} {
		if err := step(ctx); err != nil {
			c.add(finding{Check: "catalogue", Status: statusUnknown, Detail: err.Error(), Fix: "rerun kafkasink check once the server answers"})
			break
		}
	}
	return c.findings
}

// settings checks the server's settings: wal_level, the WAL a slot may
// hold, free slots and wal senders, and (17 and later) failover slots.
func (c *pgChecks) settings(ctx context.Context) error {
	var walLevel, keep string
	var version, maxSlots, usedSlots, maxSenders, usedSenders int
	var ourSlot bool
	err := c.conn.QueryRow(ctx, `select current_setting('wal_level'), current_setting('max_slot_wal_keep_size'),
		current_setting('server_version_num')::int,
		current_setting('max_replication_slots')::int, (select count(*) from pg_replication_slots)::int,
		current_setting('max_wal_senders')::int, (select count(*) from pg_stat_replication)::int,
		exists (select 1 from pg_replication_slots where slot_name = $1)`, c.t.pcfg.Slot).
		Scan(&walLevel, &keep, &version, &maxSlots, &usedSlots, &maxSenders, &usedSenders, &ourSlot)
	if err != nil {
		return err
	}
	if walLevel == "logical" {
		c.add(finding{Check: "wal_level", Status: statusOK, Detail: "logical"})
	} else {
		c.add(finding{Check: "wal_level", Status: statusFail, BlocksStart: true,
			Detail: fmt.Sprintf("wal_level is %s: logical replication needs logical", walLevel),
			Fix:    "ALTER SYSTEM SET wal_level = logical, then restart the server"})
	}
	if keep == "-1" {
		c.add(finding{Check: "max_slot_wal_keep_size", Status: statusOK,
			Detail: "-1: the slot holds WAL for as long as the sink is behind (-retained-wal-warn warns of it)"})
	} else {
		c.add(finding{Check: "max_slot_wal_keep_size", Status: statusWarn,
			Detail: fmt.Sprintf("%s: a slot that falls that far behind is invalidated, and the sink stops at the gap", keep),
			Fix:    "keep the sink within it, or decide what a gap does with -slot-gap (resnapshot or accept)"})
	}
	switch free := maxSlots - usedSlots; {
	case ourSlot:
		c.add(finding{Check: "replication slots", Status: statusOK, Detail: fmt.Sprintf("slot %q exists; %d of %d slots in use", c.t.pcfg.Slot, usedSlots, maxSlots)})
	case free > 0:
		c.add(finding{Check: "replication slots", Status: statusOK, Detail: fmt.Sprintf("%d of %d slots free for slot %q", free, maxSlots, c.t.pcfg.Slot)})
	default:
		c.add(finding{Check: "replication slots", Status: statusFail,
			Detail: fmt.Sprintf("all %d replication slots are in use, and slot %q does not exist", maxSlots, c.t.pcfg.Slot),
			Fix:    "drop an unused slot (pg_drop_replication_slot) or raise max_replication_slots and restart the server"})
	}
	if usedSenders < maxSenders {
		c.add(finding{Check: "wal senders", Status: statusOK, Detail: fmt.Sprintf("%d of %d wal senders free", maxSenders-usedSenders, maxSenders)})
	} else {
		c.add(finding{Check: "wal senders", Status: statusFail,
			Detail: fmt.Sprintf("all %d wal senders are in use", maxSenders),
			Fix:    "stop an unused replication connection or raise max_wal_senders and restart the server"})
	}
	if version >= 170000 {
		return c.failover(ctx, ourSlot)
	}
	return nil
}

// failover reports whether the slot survives a failover to a standby
// (PostgreSQL 17's failover slots). The program makes its slot a
// failover slot when it starts (-failover-slot), which check does not, so
// this is for the operator to know, never a failure.
func (c *pgChecks) failover(ctx context.Context, ourSlot bool) error {
	var sync string
	if err := c.conn.QueryRow(ctx, `select current_setting('sync_replication_slots')`).Scan(&sync); err != nil {
		return err
	}
	failover := false
	if ourSlot {
		if err := c.conn.QueryRow(ctx, `select failover from pg_replication_slots where slot_name = $1`, c.t.pcfg.Slot).Scan(&failover); err != nil {
			return err
		}
	}
	detail := fmt.Sprintf("slot failover %t, sync_replication_slots %s", failover, sync)
	if failover {
		c.add(finding{Check: "failover slots", Status: statusOK, Detail: detail})
		return nil
	}
	c.add(finding{Check: "failover slots", Status: statusWarn,
		Detail: detail + ": a promoted standby will not have the slot, and the sink stops at the gap",
		Fix: "the program makes the slot a failover slot when it starts (-failover-slot, on by default); set sync_replication_slots = on on the standby " +
			"and list its physical slot in the primary's synchronized_standby_slots (docs/postgresql-failover.md)"})
	return nil
}

// role checks that the role may replicate.
func (c *pgChecks) role(ctx context.Context) error {
	var name string
	var super, repl bool
	if err := c.conn.QueryRow(ctx, `select rolname, rolsuper, rolreplication from pg_roles where rolname = current_user`).Scan(&name, &super, &repl); err != nil {
		return err
	}
	if super || repl {
		c.add(finding{Check: "role REPLICATION", Status: statusOK, Detail: fmt.Sprintf("role %q may replicate", name)})
		return nil
	}
	c.add(finding{Check: "role REPLICATION", Status: statusFail, BlocksStart: true,
		Detail: fmt.Sprintf("role %q lacks REPLICATION: it cannot open a replication connection", name),
		Fix:    fmt.Sprintf("ALTER ROLE %s REPLICATION", sqlName(name))})
	return nil
}

// slot checks an existing slot: pgoutput, in this database, not lost.
func (c *pgChecks) slot(ctx context.Context) error {
	var plugin, walStatus string
	var here bool
	err := c.conn.QueryRow(ctx, `select coalesce(plugin, ''), coalesce(wal_status, ''), database = current_database()
		from pg_replication_slots where slot_name = $1`, c.t.pcfg.Slot).Scan(&plugin, &walStatus, &here)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if c.t.pcfg.CreateSlot {
			c.add(finding{Check: "slot", Status: statusOK, Detail: fmt.Sprintf("slot %q does not exist yet; -create makes it", c.t.pcfg.Slot)})
		} else {
			c.add(finding{Check: "slot", Status: statusFail, BlocksStart: true, Detail: fmt.Sprintf("slot %q does not exist and -create=false", c.t.pcfg.Slot),
				Fix: fmt.Sprintf("set -create, or SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", c.t.pcfg.Slot)})
		}
		return nil
	case err != nil:
		return err
	}
	var problems []string
	certain := false // a lost slot is -slot-gap's to handle
	if plugin != "pgoutput" {
		problems = append(problems, fmt.Sprintf("its plugin is %q, not pgoutput", plugin))
	}
	if !here {
		problems = append(problems, "it belongs to another database than -pg's")
	}
	certain = problems != nil
	if walStatus == "lost" {
		problems = append(problems, "it was invalidated (wal_status lost): the WAL it needs is gone")
	}
	if problems == nil {
		c.add(finding{Check: "slot", Status: statusOK, Detail: fmt.Sprintf("slot %q: pgoutput, wal_status %s", c.t.pcfg.Slot, walStatus)})
		return nil
	}
	c.add(finding{Check: "slot", Status: statusFail, BlocksStart: certain, Detail: fmt.Sprintf("slot %q: %s", c.t.pcfg.Slot, strings.Join(problems, "; ")),
		Fix: "use another -slot, or drop this one (pg_drop_replication_slot) and let -create make it: the sink then stops at the gap unless -slot-gap says otherwise"})
	return nil
}

// publication checks the publication and its tables, and then each table
// the sink reads: SELECT and the replica identity.
func (c *pgChecks) publication(ctx context.Context) error {
	pub, want := c.t.pcfg.Publication, c.t.pcfg.Tables
	var all bool
	err := c.conn.QueryRow(ctx, `select puballtables from pg_publication where pubname = $1`, pub).Scan(&all)
	exists := err == nil
	switch {
	case errors.Is(err, pgx.ErrNoRows) && c.t.pcfg.CreatePublication:
		c.add(finding{Check: "publication", Status: statusOK, Detail: fmt.Sprintf("publication %q does not exist yet; -create makes it", pub)})
	case errors.Is(err, pgx.ErrNoRows):
		c.add(finding{Check: "publication", Status: statusFail, BlocksStart: true, Detail: fmt.Sprintf("publication %q does not exist and -create=false", pub),
			Fix: fmt.Sprintf("set -create, or CREATE PUBLICATION %s FOR TABLE ...", sqlName(pub))})
	case err != nil:
		return err
	}
	var tables [][2]string // what the sink reads
	for _, name := range want {
		schema, table, err := kafkasink.ParseTableName(name)
		if err != nil {
			return err // configs has checked them
		}
		if schema == "" {
			schema = "public"
		}
		tables = append(tables, [2]string{schema, table})
	}
	if exists {
		rows, err := c.conn.Query(ctx, `select schemaname, tablename from pg_publication_tables where pubname = $1 order by 1, 2`, pub)
		if err != nil {
			return err
		}
		published, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
			var t [2]string
			return t, r.Scan(&t[0], &t[1])
		})
		if err != nil {
			return err
		}
		var exist [][2]string // a missing table is its own finding, not the publication's
		for _, t := range tables {
			var ok bool
			if err := c.conn.QueryRow(ctx, `select exists (select 1 from pg_tables where schemaname = $1 and tablename = $2)`, t[0], t[1]).Scan(&ok); err != nil {
				return err
			}
			if ok {
				exist = append(exist, t)
			}
		}
		c.publishedTables(pub, all, published, exist)
		if len(want) == 0 {
			tables = published
		}
	}
	for _, t := range tables {
		if err := c.table(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// publishedTables compares the publication's tables with -tables.
func (c *pgChecks) publishedTables(pub string, all bool, published, want [][2]string) {
	var missing, extra []string
	for _, t := range want {
		if !slices.Contains(published, t) {
			missing = append(missing, kafkasink.TableName(t[0], t[1]))
		}
	}
	for _, t := range published {
		if len(want) > 0 && !all && !slices.Contains(want, t) {
			extra = append(extra, kafkasink.TableName(t[0], t[1]))
		}
	}
	switch {
	case missing != nil:
		c.add(finding{Check: "publication tables", Status: statusFail, BlocksStart: !c.t.pcfg.AcceptPublicationTables,
			Detail: fmt.Sprintf("publication %q lacks %s of -tables", pub, strings.Join(missing, ", ")),
			Fix:    fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s (or remove them from -tables)", sqlName(pub), strings.Join(missing, ", "))})
	case extra != nil && !c.t.pcfg.AcceptPublicationTables:
		c.add(finding{Check: "publication tables", Status: statusFail, BlocksStart: true,
			Detail: fmt.Sprintf("publication %q has %s, which -tables does not list", pub, strings.Join(extra, ", ")),
			Fix:    "add them to -tables, drop them from the publication, or set -accept-publication-tables"})
	default:
		c.add(finding{Check: "publication tables", Status: statusOK, Detail: fmt.Sprintf("publication %q: %d tables", pub, len(published))})
	}
}

// table checks that the role may read t and that its updates and
// deletes can be replicated.
func (c *pgChecks) table(ctx context.Context, t [2]string) error {
	name := kafkasink.TableName(t[0], t[1])
	var ident string
	var canSelect, hasPK bool
	err := c.conn.QueryRow(ctx, `select c.relreplident::text, has_table_privilege(c.oid, 'SELECT'),
		exists (select 1 from pg_index i where i.indrelid = c.oid and i.indisprimary)
		from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and c.relname = $2`, t[0], t[1]).
		Scan(&ident, &canSelect, &hasPK)
	if errors.Is(err, pgx.ErrNoRows) {
		c.add(finding{Check: "table " + name, Status: statusFail, BlocksStart: true, Detail: "no such table",
			Fix: "correct -tables: names as stored, schema.table"})
		return nil
	}
	if err != nil {
		return err
	}
	if canSelect {
		c.add(finding{Check: "SELECT " + name, Status: statusOK, Detail: "granted"})
	} else {
		c.add(finding{Check: "SELECT " + name, Status: statusFail, BlocksStart: true,
			Detail: "the role may not read it (snapshots and backfills read it)",
			Fix:    fmt.Sprintf("GRANT SELECT ON %s TO the role of -pg", name)})
	}
	switch {
	case ident == "n" || ident == "d" && !hasPK:
		// Not BlocksStart: inserts flow, and pgcdc keys such a table by
		// event id (or null, -keyless-tables).
		c.add(finding{Check: "replica identity " + name, Status: statusFail,
			Detail: "no replica identity: the server refuses its updates and deletes once it is published, and the sink could not key them",
			Fix:    fmt.Sprintf("add a primary key, or ALTER TABLE %s REPLICA IDENTITY FULL (or USING INDEX a unique index)", name)})
	default:
		c.add(finding{Check: "replica identity " + name, Status: statusOK, Detail: map[string]string{"d": "primary key", "f": "full", "i": "index"}[ident]})
	}
	return nil
}

// sqlName is name as SQL reads it: quoted only where it must be.
func sqlName(name string) string { return kafkasink.TableName("", name) }
