package pgcdc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// SlotGap says what Run does at start-up when the slot cannot continue
// where the sink's checkpoint left off, so that changes in between would
// never reach the sink: the slot is missing (dropped, or Config.Slot or
// ConnString now name another slot or database) and Run creates it, the
// slot was invalidated (wal_status "lost"), or the slot's confirmed
// position is beyond anything Run confirmed. The zero value refuses.
type SlotGap int

const (
	// SlotGapRefuse makes Run return a *SourceError that names the
	// slot, the positions and the WAL bytes in between, before anything
	// is written. The default.
	SlotGapRefuse SlotGap = iota
	// SlotGapResnapshot reads every published table again (as Snapshot
	// does), from the snapshot the new slot exports when Run creates
	// it, else from the current state, then streams on from the slot.
	// Rows deleted in the gap are not in the new snapshot, and the
	// intermediate history is lost; the gap is recorded in the
	// checkpoint's cursor.
	SlotGapResnapshot
	// SlotGapAccept streams on from the slot and records the gap in the
	// checkpoint's cursor: changes in the gap are missing from the sink.
	SlotGapAccept
)

var slotGapNames = [...]string{"refuse", "resnapshot", "accept"}

// String returns "refuse", "resnapshot" or "accept".
func (g SlotGap) String() string {
	if g < 0 || int(g) >= len(slotGapNames) {
		return fmt.Sprintf("SlotGap(%d)", int(g))
	}
	return slotGapNames[g]
}

// MarshalText returns String, so a SlotGap works with flag.TextVar.
func (g SlotGap) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses "refuse", "resnapshot" or "accept".
func (g *SlotGap) UnmarshalText(b []byte) error {
	for i, n := range slotGapNames {
		if string(b) == n {
			*g = SlotGap(i)
			return nil
		}
	}
	return fmt.Errorf("slot gap policy %q: want refuse, resnapshot or accept", b)
}

// SourceEventKind says what Run found at the source.
type SourceEventKind int

const (
	// SourceSlotMissing means the slot does not exist at start-up although
	// the sink's checkpoint is not zero.
	SourceSlotMissing SourceEventKind = iota + 1
	// SourceSlotInvalidated means the slot's wal_status is "lost" (the server
	// removed WAL it needed, after max_slot_wal_keep_size), or on a
	// standby it conflicts with recovery (PostgreSQL 16 and later).
	SourceSlotInvalidated
	// SourceSlotAdvanced means the slot's confirmed_flush_lsn is beyond the
	// highest position Run confirmed (pg_replication_slot_advance, or
	// another program consumed the slot).
	SourceSlotAdvanced
	// SourceSlotLost means the slot disappeared while Run was using it.
	SourceSlotLost
	// SourceIdentityMismatch means the checkpoint was written for another
	// system, database or slot.
	SourceIdentityMismatch
	// SourceTimelineChanged means the server's timeline differs from the
	// checkpoint's (a standby was promoted, or a backup restored).
	// Reported, not refused.
	SourceTimelineChanged
	// SourceWALRetained means the slot holds back more WAL than
	// Config.RetainedWALWarn.
	SourceWALRetained
	// SourceTimelineDiverged means the sink's checkpoint is not on the
	// server's timeline history: Kafka holds changes the server never
	// had (an asynchronous standby was promoted before it received
	// them). Handled as a gap, as Config.SlotGap says; see Timeline.
	SourceTimelineDiverged
)

var sourceEventNames = [...]string{"", "slot_missing", "slot_invalidated", "slot_advanced", "slot_lost", "identity_mismatch", "timeline_changed", "wal_retained", "timeline_diverged"}

// String returns the kind's name in snake case, as the gap records of the
// cursor and the log lines write it: "slot_missing", "wal_retained".
func (k SourceEventKind) String() string {
	if k <= 0 || int(k) >= len(sourceEventNames) {
		return fmt.Sprintf("SourceEventKind(%d)", int(k))
	}
	return sourceEventNames[k]
}

// SourceEvent is what Config.OnSourceEvent receives: one event Run found
// at the source. It is a value; Run does not touch it after the call.
type SourceEvent struct {
	Kind SourceEventKind // what Run found
	Slot string          // the replication slot, Config.Slot
	// From and To bound the changes concerned: for a gap, the last
	// position known delivered or confirmed and where the slot's stream
	// begins (the current WAL position while the slot does not exist);
	// for SourceWALRetained, the slot's restart_lsn and the current WAL
	// position. Zero when unknown.
	From, To kafkasink.LSN
	// Bytes is the WAL between From and To.
	Bytes int64
	// Action is how Run handled a gap: SlotGapRefuse when it stopped,
	// else the Config.SlotGap it applied.
	Action SlotGap
	// Err is the error Run returns for this event; nil when Run goes on.
	Err error
	// Detail explains the event in words, when Err does not.
	Detail string
	// Timeline places the checkpoint on the server's timeline history,
	// for SourceTimelineChanged and SourceTimelineDiverged; else nil.
	Timeline *TimelineChange
}

// SourceError is returned by Run when going on would skip changes in
// silence or mix two sources in one sink: a gap that Config.SlotGap
// refuses, a checkpoint of another source, a slot lost while streaming.
// Its message names what happened and the ways out. Fatal: Run does not
// retry it. Test with errors.As.
type SourceError struct {
	Kind     SourceEventKind // what Run found, as in SourceEvent
	Slot     string          // the replication slot, Config.Slot
	From, To kafkasink.LSN   // as in SourceEvent
	Bytes    int64           // the WAL between From and To, as in SourceEvent
	// Detail is the whole explanation, the ways out included.
	Detail string
	// Timeline is set for SourceTimelineDiverged, as in SourceEvent.
	Timeline *TimelineChange
}

// Error returns the Detail, prefixed with the package.
func (e *SourceError) Error() string { return "pgcdc: " + e.Detail }

// waysOut is the advice of every gap refusal.
const waysOut = "Ways out: read the published tables again from the slot, keeping the gap on record " +
	"(Config.SlotGap = SlotGapResnapshot; cmd/kafkasink: -slot-gap=resnapshot), or accept the gap " +
	"(Config.SlotGap = SlotGapAccept; -slot-gap=accept), which is logged and recorded in the checkpoint's cursor; " +
	"or start a new sink (a new kafkasink.Config.SinkID, -sink-id) with a snapshot (Config.Snapshot, -snapshot)"

// resetAdvice says how to make the sink forget its checkpoint.
const resetAdvice = "or, to start this sink id over, delete its checkpoint: produce a tombstone " +
	"(key = the sink id, null value) to the checkpoint topic (kafkasink.Config.CheckpointTopic, -checkpoint-topic; " +
	"default " + kafkasink.DefaultCheckpointTopic + "), for example `printf '%s#\\n' SINK_ID | kcat -P -b BROKER -t TOPIC -K '#' -Z`; " +
	"the sink then delivers everything again from the slot, with new positions"

// sourceFacts is what Run knows about the source and the sink at the
// start of an attempt.
type sourceFacts struct {
	cfg *Config
	// streamed is set once an earlier attempt of this Run streamed
	// from the slot: a gap found now opened while Run was using it.
	streamed bool
	ck       kafkasink.Checkpoint
	cur      cursor
	id       sourceIdentity
	slot     slotState
	// history is the server's timeline history, read when its timeline
	// differs from the checkpoint's.
	history []timelineSwitch
}

// sourcePlan is what Run does about the source before it snapshots or
// streams.
type sourcePlan struct {
	refuse error // stop with this error
	// gap is the gap Run goes on across, applying cfg.SlotGap; its To is
	// filled in once a slot Run creates has its consistent point.
	gap *SourceEvent
	// timeline is set when the timeline differs from the checkpoint's:
	// where the checkpoint stands on the server's history.
	timeline *TimelineChange
	// adopt is set when the checkpoint has changes but no identity (an
	// earlier version wrote it): the identity is recorded from now on.
	adopt bool
	// drop is set when the invalidated slot must be dropped before it
	// is created again.
	drop   bool
	create bool
}

// planSource decides, without side effects, whether Run may go on with
// the slot and the checkpoint, and how.
func planSource(f sourceFacts) sourcePlan {
	var p sourcePlan
	if p.planIdentity(f); p.refuse != nil {
		return p
	}
	if !p.planTimeline(f) {
		p.planSlot(f)
	}
	if p.refuse != nil && p.gap != nil {
		p.gap.Action, p.gap.Err = SlotGapRefuse, p.refuse
	}
	if p.create && p.refuse == nil && !f.cfg.CreateSlot {
		p.refuse = &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: replication slot %q must be created again (%s) and Config.CreateSlot is off: set Config.CreateSlot (-create), or drop and create the slot yourself",
			f.cfg.Slot, p.gap.Kind)}}
		p.gap.Action, p.gap.Err = SlotGapRefuse, p.refuse
	}
	return p
}

// planIdentity compares the source with the one the checkpoint records,
// once something was delivered: another source is refused, a checkpoint
// without an identity adopted. The timeline is planTimeline's.
func (p *sourcePlan) planIdentity(f sourceFacts) {
	if f.ck.IsZero() {
		return
	}
	rec := f.cur.Source
	if rec == nil {
		p.adopt = true
		return
	}
	if diffs := rec.differences(f.id); diffs != nil {
		p.refuse = &SourceError{Kind: SourceIdentityMismatch, Slot: f.cfg.Slot, Detail: fmt.Sprintf(
			"the sink's checkpoint (at %s) was written for another source: %s. Resuming from it would skip or mix changes. "+
				"If Config.ConnString (-pg) or Config.Slot (-slot) is wrong, fix it; to stream this source into Kafka, "+
				"give it its own sink (kafkasink.Config.SinkID, -sink-id), %s",
			f.ck.Position, strings.Join(diffs, "; "), resetAdvice)}
	}
}

// planSlot decides about the slot: create a missing one, drop and create
// an invalidated one, and the gap either opens, which Config.SlotGap
// accepts or refuses.
func (p *sourcePlan) planSlot(f sourceFacts) {
	slot := f.cfg.Slot
	delivered := !f.ck.IsZero()
	from := max(kafkasink.LSN(f.cur.Confirmed), f.ck.Position.LSN)
	gap := func(kind SourceEventKind, to kafkasink.LSN) *SourceEvent {
		g := &SourceEvent{Kind: kind, Slot: slot, From: from, To: to, Action: f.cfg.SlotGap}
		if to > from {
			g.Bytes = int64(to - from)
		}
		return g
	}
	switch {
	case !f.slot.exists && f.streamed:
		p.gap = gap(SourceSlotLost, f.slot.current)
		p.refuse = fmt.Errorf("%w: slot %q no longer exists; the changes it held since the last confirmed position (%s) are gone. "+
			"Run stops rather than skip them; started again, it applies Config.SlotGap (-slot-gap in cmd/kafkasink) to the gap",
			ErrSlotLost, slot, kafkasink.LSN(f.cur.Confirmed))
	case !f.slot.exists && !delivered:
		if !f.cfg.CreateSlot {
			p.refuse = &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
				"pgcdc: replication slot %q does not exist: create it (SELECT pg_create_logical_replication_slot('%s', 'pgoutput')) or set Config.CreateSlot",
				slot, slot)}}
		}
		p.create = true
	case !f.slot.exists:
		p.gap = gap(SourceSlotMissing, f.slot.current)
		p.refuse = p.refuseGap(fmt.Sprintf(
			"replication slot %q does not exist, but the sink's checkpoint is at %s (highest position confirmed to the slot: %s): "+
				"the slot was dropped, or Config.Slot (-slot) or Config.ConnString (-pg) name a new slot or database. "+
				"The changes after %s are in no slot; a new slot starts at or after the current WAL position %s, %d bytes of WAL later, so they would be skipped",
			slot, f.ck.Position, kafkasink.LSN(f.cur.Confirmed), from, f.slot.current, p.gap.Bytes), f)
		p.create = true
	case f.slot.invalidated():
		p.gap = gap(SourceSlotInvalidated, f.slot.current)
		p.refuse = p.refuseGap(fmt.Sprintf(
			"replication slot %q is invalidated (%s): the server removed WAL it still needed, so the changes after %s (up to the current WAL position %s, %d bytes) cannot be streamed. "+
				"max_slot_wal_keep_size bounds the WAL a slot may hold; raise it or keep Run running",
			slot, f.slot.invalidation(), from, f.slot.current, p.gap.Bytes), f)
		p.drop, p.create = true, true
	case delivered && f.cur.Confirmed != 0 && f.slot.confirmed > kafkasink.LSN(f.cur.Confirmed):
		p.gap = gap(SourceSlotAdvanced, f.slot.confirmed)
		p.gap.From = kafkasink.LSN(f.cur.Confirmed)
		p.gap.Bytes = int64(f.slot.confirmed - kafkasink.LSN(f.cur.Confirmed))
		p.refuse = p.refuseGap(fmt.Sprintf(
			"replication slot %q has confirmed_flush_lsn %s, beyond the highest position this sink confirmed, %s: "+
				"someone moved it (pg_replication_slot_advance, or another program consumed the slot), so the changes in between (%d bytes of WAL) would be skipped",
			slot, f.slot.confirmed, p.gap.From, p.gap.Bytes), f)
		if p.refuse == nil && f.cfg.SlotGap == SlotGapResnapshot && f.slot.confirmed <= f.ck.Position.LSN {
			p.refuse = &SourceError{Kind: SourceSlotAdvanced, Slot: slot, From: p.gap.From, To: p.gap.To, Bytes: p.gap.Bytes, Detail: fmt.Sprintf(
				"replication slot %q was moved to %s, beyond what this sink confirmed (%s) but not beyond its checkpoint %s: "+
					"a snapshot there would sort below the checkpoint and be skipped. Accept the gap (Config.SlotGap = SlotGapAccept, -slot-gap=accept), "+
					"or start a new sink (kafkasink.Config.SinkID, -sink-id) with Config.Snapshot (-snapshot)",
				slot, f.slot.confirmed, p.gap.From, f.ck.Position)}
		}
	}
}

// refuseGap returns the refusal of a gap when Config.SlotGap refuses it,
// or when it opened while Run streamed; else nil.
func (p *sourcePlan) refuseGap(what string, f sourceFacts) error {
	p.gap.Detail = what
	if f.cfg.SlotGap != SlotGapRefuse && !f.streamed {
		return nil
	}
	g := p.gap
	advice := waysOut + "."
	if f.streamed {
		advice = "It happened while Run was streaming; Run stops rather than skip changes, and started again it applies Config.SlotGap. " + waysOut + "."
	}
	return &SourceError{Kind: g.Kind, Slot: g.Slot, From: g.From, To: g.To, Bytes: g.Bytes, Detail: what + ". " + advice}
}

// checkCreated checks a slot Run created across a gap: its stream must
// begin after the checkpoint, or the checkpoint is of a later point in
// the source's history than the server has reached (a restored backup,
// another server), and the sink would skip everything up to it.
func checkCreated(f sourceFacts, consistent kafkasink.LSN) error {
	if f.ck.IsZero() || consistent > f.ck.Position.LSN {
		return nil
	}
	return &SourceError{Kind: SourceSlotMissing, Slot: f.cfg.Slot, From: f.ck.Position.LSN, To: consistent, Detail: fmt.Sprintf(
		"the new replication slot %q begins at %s, at or before the sink's checkpoint %s: the server's WAL is behind what the sink delivered "+
			"(a backup restored, or another server under the same system identifier), and the sink would skip every change up to %s. "+
			"The slot was dropped again. Give this source its own sink (kafkasink.Config.SinkID, -sink-id), %s",
		f.cfg.Slot, consistent, f.ck.Position, f.ck.Position.LSN, resetAdvice)}
}

// report logs a source event and passes it to Config.OnSourceEvent.
func (r *runner) report(ev SourceEvent) {
	level, msg := slog.LevelWarn, "source: "+ev.Kind.String()
	switch {
	case ev.Err != nil:
		level, msg = slog.LevelError, msg+": refused"
	case ev.Kind == SourceSlotMissing || ev.Kind == SourceSlotInvalidated || ev.Kind == SourceSlotAdvanced:
		msg += ": going on across the gap as Config.SlotGap says: " + ev.Action.String()
	}
	attrs := []any{"kind", ev.Kind.String()}
	if ev.Detail != "" && ev.Err == nil { // an error says it all
		attrs = append(attrs, "detail", ev.Detail)
	}
	if ev.From != 0 || ev.To != 0 {
		attrs = append(attrs, "from", ev.From.String(), "to", ev.To.String(), "wal_bytes", ev.Bytes)
	}
	if ev.Err != nil {
		attrs = append(attrs, "error", ev.Err)
	}
	r.log.Log(context.Background(), level, msg, attrs...)
	r.notify(ev)
}

// notify passes ev to Config.OnSourceEvent, without logging it.
func (r *runner) notify(ev SourceEvent) {
	if r.cfg.OnSourceEvent != nil {
		r.cfg.OnSourceEvent(ev)
	}
}
