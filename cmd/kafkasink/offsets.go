package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// offsetsTimeout bounds each step of offsets show and reset that talks to
// a server.
const offsetsTimeout = 2 * time.Minute

// offsetsDoc is what offsets show prints, and offsets reset before and
// after: the sink's checkpoint, pgcdc's cursor in it (the source's
// identity, the position confirmed to the slot, the gaps accepted, the
// backfills in progress, the snapshot's state: its fields as pgcdc wrote
// them), the slot, and who holds the lease.
type offsetsDoc struct {
	SinkID          string          `json:"sink_id"`
	CheckpointTopic string          `json:"checkpoint_topic"`
	Position        string          `json:"position"` // "" when nothing was delivered
	Mode            string          `json:"mode,omitempty"`
	WrittenAt       string          `json:"written_at,omitempty"` // RFC 3339
	Cursor          json.RawMessage `json:"cursor,omitempty"`
	Slot            string          `json:"slot"`
	SlotConfirmed   string          `json:"slot_confirmed_lsn,omitempty"` // "" when the slot does not exist
	SlotActivePID   int32           `json:"slot_active_pid,omitempty"`    // the walsender streaming it; 0 when none
	LeaseHolder     string          `json:"lease_holder,omitempty"`       // "" when nobody holds the lease
}

// offsets is the offsets command: show, or reset. Exit status: 0 done,
// 1 refused or failed (nothing written), 2 a configuration error.
func offsets(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "show" && args[0] != "reset" {
		fmt.Fprintln(stderr, "kafkasink offsets: want show or reset: kafkasink offsets show [-o json] [flags], kafkasink offsets reset -to current|resnapshot|<LSN>|<LSN>:<index> [-yes] [flags]")
		return 2
	}
	sub := args[0]
	own := map[string]string{"o": "table"}
	if sub == "reset" {
		own["to"], own["yes"] = "", "false"
	}
	args, err := takeFlags(args[1:], own)
	if err == nil {
		err = outputProblem(own["o"])
	}
	if err != nil {
		fmt.Fprintf(stderr, "kafkasink offsets %s: %v\n", sub, err)
		return 2
	}
	o, problems, exit, ok := parseArgs(args, getenv, stderr)
	if !ok {
		return exit
	}
	kcfg, pcfg, err := o.configs(slog.New(slog.DiscardHandler))
	problems = append(problems, problemsOf(err)...)
	var target resetTarget
	if sub == "reset" {
		target, err = parseResetTarget(own["to"], o)
		problems = append(problems, problemsOf(err)...)
	}
	if problems != nil {
		printProblems(stderr, configError(problems))
		return 2
	}
	doc, err := readOffsets(ctx, kcfg, pcfg)
	if err != nil {
		fmt.Fprintf(stderr, "kafkasink offsets %s: %s\n", sub, speakFlags(err.Error()))
		return 1
	}
	printDoc := func(d offsetsDoc) {
		if own["o"] == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(d)
			return
		}
		printOffsets(stdout, d)
	}
	if sub == "show" {
		printDoc(doc)
		return 0
	}
	after, err := reset(ctx, kcfg, pcfg, doc, target, own["yes"] == "true", stdout)
	if err != nil {
		fmt.Fprintf(stderr, "kafkasink offsets reset: %s\n", speakFlags(err.Error()))
		return 1
	}
	printDoc(after)
	return 0
}

// resetTarget is where offsets reset moves the checkpoint.
type resetTarget struct {
	current    bool               // stay: report only
	resnapshot bool               // delete it and drop the slot: the next run reads every table again
	position   kafkasink.Position // else: this position, the cursor kept
}

// parseResetTarget reads -to.
func parseResetTarget(to string, o *options) (resetTarget, error) {
	const want = "want current (report only), resnapshot, an LSN such as 0/16B3748 (every change committed up to it counts as delivered) or a position <LSN>:<index>"
	switch {
	case to == "":
		return resetTarget{}, errors.New("kafkasink offsets reset needs -to: " + want)
	case to == "current":
		return resetTarget{current: true}, nil
	case to == "resnapshot":
		if !o.snapshot || !o.create {
			return resetTarget{}, errors.New("-to resnapshot drops the slot and deletes the checkpoint, so that the next run creates the slot and reads every table from its snapshot: " +
				"it needs the configuration the next run uses, with -snapshot and -create")
		}
		return resetTarget{resnapshot: true}, nil
	case strings.Contains(to, ":"):
		p, err := kafkasink.ParsePosition(to)
		if err != nil {
			return resetTarget{}, fmt.Errorf("-to %q: %s", to, want)
		}
		return resetTarget{position: p}, nil
	}
	lsn, err := kafkasink.ParseLSN(to)
	if err != nil || lsn == 0 {
		return resetTarget{}, fmt.Errorf("-to %q: %s", to, want)
	}
	// The last position of the transaction committed at lsn: the
	// checkpoint covers all of it.
	return resetTarget{position: kafkasink.Position{LSN: lsn, Index: math.MaxUint64}}, nil
}

// readOffsets reads the checkpoint (fencing nothing), the slot and the
// lease's holder.
func readOffsets(ctx context.Context, kcfg kafkasink.Config, pcfg pgcdc.Config) (offsetsDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, offsetsTimeout)
	defer cancel()
	doc := offsetsDoc{SinkID: kcfg.SinkID, CheckpointTopic: kcfg.CheckpointTopic, Slot: pcfg.Slot}
	if doc.CheckpointTopic == "" {
		doc.CheckpointTopic = kafkasink.DefaultCheckpointTopic
	}
	ck, err := kafkasink.ReadCheckpoint(ctx, kcfg)
	if err != nil {
		return doc, err
	}
	if !ck.IsZero() {
		doc.Position, doc.Mode, doc.WrittenAt, doc.Cursor = ck.Position.String(), ck.Mode.String(), ck.Time.UTC().Format(time.RFC3339Nano), ck.Cursor
	}
	conn, err := connectPG(ctx, pcfg)
	if err != nil {
		return doc, err
	}
	defer conn.Close(context.Background())
	return doc, slotAndLease(ctx, conn, &doc)
}

// connectPG opens an ordinary connection as pgcdc's Config reaches the
// database.
func connectPG(ctx context.Context, pcfg pgcdc.Config) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(pcfg.ConnString)
	if err == nil && pcfg.ConfigureConn != nil {
		err = pcfg.ConfigureConn(ctx, &cc.Config)
	}
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cc)
}

// slotAndLease fills in the slot's confirmed position, its walsender,
// and who holds its lease (pgcdc.LeaseKey: an advisory lock in the
// slot's database).
func slotAndLease(ctx context.Context, conn *pgx.Conn, doc *offsetsDoc) error {
	var confirmed *string
	var active *int32
	err := conn.QueryRow(ctx, `select confirmed_flush_lsn::text, active_pid from pg_replication_slots where slot_name = $1`, doc.Slot).Scan(&confirmed, &active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("reading slot %q: %w", doc.Slot, err)
	default:
		doc.SlotConfirmed = deref(confirmed)
		if active != nil {
			doc.SlotActivePID = *active
		}
	}
	key := pgcdc.LeaseKey(doc.Slot)
	var holder *string
	err = conn.QueryRow(ctx, `select coalesce(a.application_name, '') || ' (pid ' || l.pid || ', ' || coalesce(host(a.client_addr) || ':' || a.client_port, 'local socket') || ')'
		from pg_locks l left join pg_stat_activity a on a.pid = l.pid
		where l.locktype = 'advisory' and l.granted and l.objsubid = 1
		and l.database = (select oid from pg_database where datname = current_database())
		and l.classid = $1::bigint::oid and l.objid = $2::bigint::oid`,
		int64(uint64(key)>>32), int64(uint32(key))).Scan(&holder)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("looking up the lease of slot %q in pg_locks: %w", doc.Slot, err)
	default:
		doc.LeaseHolder = deref(holder)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// printOffsets writes doc as lines of name and value, and the cursor's
// fields one a line.
func printOffsets(w io.Writer, doc offsetsDoc) {
	line := func(name, value string) { fmt.Fprintf(w, "%-20s %s\n", name, value) }
	line("sink id", doc.SinkID)
	line("checkpoint topic", doc.CheckpointTopic)
	if doc.Position == "" {
		line("checkpoint", "none: nothing delivered yet")
	} else {
		line("checkpoint", doc.Position)
		line("mode", doc.Mode)
		line("written at", doc.WrittenAt)
	}
	var cursor map[string]json.RawMessage
	if json.Unmarshal(doc.Cursor, &cursor) == nil && len(cursor) > 0 {
		fmt.Fprintln(w, "cursor:")
		for _, k := range slices.Sorted(maps.Keys(cursor)) {
			fmt.Fprintf(w, "  %-18s %s\n", k, cursor[k])
		}
	} else if len(doc.Cursor) > 0 {
		line("cursor", string(doc.Cursor))
	}
	switch {
	case doc.SlotConfirmed == "":
		line("slot", fmt.Sprintf("%s: does not exist", doc.Slot))
	case doc.SlotActivePID != 0:
		line("slot", fmt.Sprintf("%s: confirmed_flush_lsn %s, streamed by pid %d", doc.Slot, doc.SlotConfirmed, doc.SlotActivePID))
	default:
		line("slot", fmt.Sprintf("%s: confirmed_flush_lsn %s, not streamed", doc.Slot, doc.SlotConfirmed))
	}
	if doc.LeaseHolder == "" {
		line("lease", "free")
	} else {
		line("lease", "held by "+doc.LeaseHolder)
	}
}

// reset moves the checkpoint to target, guarded: it refuses while an
// instance holds the slot's lease or streams the slot, holds the lease
// itself while it writes (so that no replica starts meanwhile), and
// without yes only says what it would do. The write goes through
// kafkasink.ResetCheckpoint: a transaction of the sink's own
// transactional id, which would fence a running instance, hence the
// guard.
func reset(ctx context.Context, kcfg kafkasink.Config, pcfg pgcdc.Config, before offsetsDoc, target resetTarget, yes bool, stdout io.Writer) (offsetsDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, offsetsTimeout)
	defer cancel()
	from := before.Position
	if from == "" {
		from = "none"
	}
	if target.current {
		fmt.Fprintf(stdout, "the checkpoint stays at %s; nothing written\n", from)
		return before, nil
	}
	if err := guard(before); err != nil {
		return before, err
	}
	var ck kafkasink.Checkpoint
	plan := fmt.Sprintf("delete the checkpoint (at %s) and drop slot %q: the next run creates the slot and reads every table from its snapshot", from, pcfg.Slot)
	if !target.resnapshot {
		ck = kafkasink.Checkpoint{Position: target.position, Cursor: before.Cursor}
		plan = fmt.Sprintf("move the checkpoint from %s to %s, keeping its cursor: changes up to there count as delivered", from, target.position)
		if slot, err := kafkasink.ParseLSN(before.SlotConfirmed); err == nil && target.position.LSN < slot {
			return before, fmt.Errorf("-to %s is below slot %q's confirmed_flush_lsn %s: the slot cannot stream changes before it again, so they would be missing, not delivered again; "+
				"to read the tables again use -to resnapshot", target.position, pcfg.Slot, slot)
		}
	}
	if !yes {
		return before, fmt.Errorf("would %s; nothing written: add -yes to do it", plan)
	}
	// Free a moment ago; taken meanwhile, it is refused as above, only
	// later.
	lctx, cancelLease := context.WithTimeout(ctx, 15*time.Second)
	lease, err := pgcdc.AcquireLease(lctx, leaseConfig(pcfg, leaseOptions{enabled: true}, slog.New(slog.DiscardHandler)))
	cancelLease()
	if err != nil {
		return before, fmt.Errorf("taking the lease of slot %q for the reset: %w", pcfg.Slot, err)
	}
	defer lease.Release()
	if target.resnapshot && before.SlotConfirmed != "" {
		conn, err := connectPG(ctx, pcfg)
		if err != nil {
			return before, err
		}
		_, err = conn.Exec(ctx, `select pg_drop_replication_slot($1)`, pcfg.Slot)
		conn.Close(context.Background())
		if err != nil {
			return before, fmt.Errorf("dropping slot %q: %w", pcfg.Slot, err)
		}
	}
	if err := lease.Check(); err != nil {
		return before, err
	}
	if err := kafkasink.ResetCheckpoint(ctx, kcfg, ck); err != nil {
		return before, err
	}
	fmt.Fprintf(stdout, "done: %s\n", plan)
	lease.Release() // before the read, which would report this process as the holder
	return readOffsets(ctx, kcfg, pcfg)
}

// guard refuses a reset while an instance may write: one holds the
// lease (-ha), or a walsender streams the slot (an instance with
// -ha=false, or another consumer).
func guard(doc offsetsDoc) error {
	switch {
	case doc.LeaseHolder != "":
		return fmt.Errorf("an instance holds the lease of slot %q: %s; the reset would fence it. Stop every replica first, then reset", doc.Slot, doc.LeaseHolder)
	case doc.SlotActivePID != 0:
		return fmt.Errorf("slot %q is being streamed by pid %d (an instance with -ha=false?); the reset would fence it. Stop it first, then reset", doc.Slot, doc.SlotActivePID)
	}
	return nil
}
