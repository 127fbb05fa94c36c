package pgcdc

import (
	"fmt"

	"github.com/kafkasink/kafkasink"
)

// TimelineChange places the sink's checkpoint on the server's timeline
// history once the server's timeline differs from the one the checkpoint
// was written on (a standby was promoted, a backup restored). It is a
// value; Run does not touch it after handing it over.
type TimelineChange struct {
	// From is the timeline the checkpoint was written on; 0 when the
	// checkpoint records none (an earlier version wrote it).
	From int32
	// To is the server's timeline.
	To int32
	// Switchpoint is where the server's history left timeline From: the
	// server has the changes committed on From before it. 0 when From is
	// not in the server's history, or unknown.
	Switchpoint kafkasink.LSN
	// Checkpoint is the commit LSN of the last change in Kafka, the
	// sink's checkpoint position.
	Checkpoint kafkasink.LSN
	// LastCommitEnd is where the last commit record the cursor recorded
	// ends: that transaction's, or a later one's that had nothing to
	// deliver. 0 when the cursor does not record it.
	LastCommitEnd kafkasink.LSN
	// Diverged is set when the checkpoint is not on the server's
	// history: the changes committed on timeline From from Switchpoint
	// up to Checkpoint are in Kafka, and the server never had them.
	Diverged bool
	// StreamedThrough is set when the checkpoint lies at or beyond the
	// switchpoint, but the slot on the server has confirmed exactly the
	// position the sink recorded last: Run streamed from this server's
	// slot through its promotion (decoding on a standby), so the changes
	// after the switchpoint came from the server's own timeline and
	// nothing diverged. They were recorded under timeline From because
	// the stream does not say when the server it reads is promoted.
	StreamedThrough bool
}

// timelineRecord is a TimelineChange as a gap record keeps it.
type timelineRecord struct {
	From          int32   `json:"from_timeline"`
	To            int32   `json:"to_timeline"`
	Switchpoint   lsnText `json:"switchpoint,omitempty"`
	Checkpoint    lsnText `json:"checkpoint"`
	LastCommitEnd lsnText `json:"last_commit_end,omitempty"`
}

func (c *TimelineChange) record() *timelineRecord {
	if c == nil {
		return nil
	}
	return &timelineRecord{From: c.From, To: c.To, Switchpoint: lsnText(c.Switchpoint),
		Checkpoint: lsnText(c.Checkpoint), LastCommitEnd: lsnText(c.LastCommitEnd)}
}

// planTimeline places the checkpoint on the server's timeline history
// (f.history) when the server's timeline differs from the checkpoint's,
// and returns true when the checkpoint diverged from it: then it plans
// the gap as Config.SlotGap says, in place of planSlot. It notes the
// change in p.timeline either way.
func (p *sourcePlan) planTimeline(f sourceFacts) bool {
	if f.ck.IsZero() || f.cur.Source == nil || f.cur.Source.Timeline == f.id.Timeline {
		return false
	}
	pl := placeCheckpoint(f.cur.Source.Timeline, f.ck.Position.LSN, f.id.Timeline, f.history)
	p.timeline = &TimelineChange{From: f.cur.Source.Timeline, To: f.id.Timeline, Switchpoint: pl.switchpoint,
		Checkpoint: f.ck.Position.LSN, LastCommitEnd: kafkasink.LSN(f.cur.LastCommitEnd),
		Diverged: pl.place == placeDiverged || pl.place == placeForeign}
	if pl.place == placeDiverged && streamedThrough(f) {
		p.timeline.Diverged, p.timeline.StreamedThrough = false, true
	}
	if !p.timeline.Diverged {
		return false
	}
	tc, slot, ck := p.timeline, f.cfg.Slot, f.ck.Position.LSN
	p.gap = &SourceEvent{Kind: SourceTimelineDiverged, Slot: slot, From: tc.Switchpoint, To: ck, Bytes: int64(ck - tc.Switchpoint), Action: f.cfg.SlotGap, Timeline: tc}
	what := divergenceDetail(tc, f.slot.current)
	p.refuse = p.refuseGap(what+". Run stops rather than mix the two histories. "+divergenceWaysOut(tc), f)
	p.gap.Detail = what + ". Going on as Config.SlotGap says. " + divergenceWaysOut(tc)
	if se, ok := p.refuse.(*SourceError); ok {
		se.Timeline = tc
	}
	if p.refuse != nil {
		return true
	}
	// Either way out needs a slot that begins beyond the checkpoint: a
	// re-snapshot takes a new slot's exported snapshot, and acceptance
	// keeps an existing slot, streaming from the checkpoint on.
	p.drop = f.slot.exists && (f.cfg.SlotGap == SlotGapResnapshot || f.slot.invalidated())
	p.create = p.drop || !f.slot.exists
	if p.create && f.slot.current <= ck {
		p.refuse = &SourceError{Kind: SourceTimelineDiverged, Slot: slot, From: tc.Switchpoint, To: ck, Bytes: p.gap.Bytes, Timeline: tc, Detail: fmt.Sprintf(
			"%s. Config.SlotGap is %s, which needs a new slot beginning after the checkpoint %s, but the server's WAL is only at %s: "+
				"the changes it makes up to %s would sort at or below the checkpoint and the sink would skip them. "+
				"Start again once the server's WAL has passed %s (as it writes, or at once with SELECT pg_switch_wal() on it)",
			what, f.cfg.SlotGap, ck, f.slot.current, ck, ck)}
		p.drop, p.create = false, false
	}
	return true
}

// streamedThrough reports whether the slot on the server confirmed
// exactly the position this sink recorded last, at or beyond the
// checkpoint. Run confirms a position only to the slot it streamed it
// from, after delivering everything before it, so the slot's own server
// sent the changes up to it. A slot created or synchronised on the
// server by anyone else begins at its own position, which does not
// match by chance; one that lags what Run recorded (the connection broke
// between recording and confirming) does not count, and the divergence
// is refused, whose ways out then apply.
func streamedThrough(f sourceFacts) bool {
	confirmed := kafkasink.LSN(f.cur.Confirmed)
	return f.slot.exists && !f.slot.invalidated() && confirmed != 0 && f.slot.confirmed == confirmed && confirmed >= f.ck.Position.LSN
}

// divergenceDetail explains a divergence: the timelines, the range of
// changes in Kafka the server never had, the transactions known, and
// what each way out leaves in Kafka.
func divergenceDetail(tc *TimelineChange, current kafkasink.LSN) string {
	where := fmt.Sprintf("this server's timeline %d does not descend from timeline %d at all (its history does not list it: "+
		"a sibling timeline, or the server is an old primary that did not follow the promotion), so none of timeline %d's changes "+
		"after their common ancestor can be placed", tc.To, tc.From, tc.From)
	lost := fmt.Sprintf("the changes committed on timeline %d up to %s from where it branched (unknown to this server)", tc.From, tc.Checkpoint)
	if tc.Switchpoint != 0 {
		where = fmt.Sprintf("this server's history left timeline %d at %s, when it was promoted to timeline %d", tc.From, tc.Switchpoint, tc.To)
		lost = fmt.Sprintf("the changes committed on timeline %d from %s up to %s (%d bytes of WAL)", tc.From, tc.Switchpoint, tc.Checkpoint, tc.Checkpoint-tc.Switchpoint)
	}
	since := tc.Switchpoint.String()
	if tc.Switchpoint == 0 {
		since = fmt.Sprintf("where timeline %d branched", tc.From)
	}
	txns := fmt.Sprintf("the last of them committed at %s", tc.Checkpoint)
	if tc.LastCommitEnd != 0 {
		txns += fmt.Sprintf(" (the last commit the cursor recorded, perhaps of a transaction with nothing to deliver, ends at %s)", tc.LastCommitEnd)
	}
	return fmt.Sprintf("the sink's checkpoint is at %s on timeline %d, but %s (the server's WAL is now at %s): "+
		"Kafka holds %s, which this server never had: a standby was promoted before it received them. "+
		"Which transactions those are the checkpoint does not record beyond the last, and no transaction ids: %s; in Kafka they are the records "+
		"written before the failover whose commit LSN header (%s) is at or beyond %s",
		tc.Checkpoint, tc.From, where, current, lost, txns, kafkasink.HeaderCommitLSN, since)
}

// divergenceWaysOut says what each way out of a divergence leaves in
// Kafka.
func divergenceWaysOut(tc *TimelineChange) string {
	return fmt.Sprintf("A re-snapshot reads this server's tables again through a new slot: "+
		"the diverged records stay in Kafka and the snapshot's records (op read) follow them with this server's current rows; "+
		"a row only the diverged changes wrote gets no delete after it. "+
		"Accepting streams on after the checkpoint: the diverged records stay, and this server's own changes committed at or below %s, "+
		"or before a slot Run creates for it, are not delivered", tc.Checkpoint)
}

// timelineDetail explains a timeline change without divergence.
func timelineDetail(tc *TimelineChange) string {
	if tc.From == 0 {
		return fmt.Sprintf("the server is on timeline %d and the checkpoint records no timeline (an earlier version wrote it): "+
			"it cannot be placed on the server's history; its timeline is recorded from now on", tc.To)
	}
	if tc.StreamedThrough {
		return fmt.Sprintf("the checkpoint %s, recorded under timeline %d, lies beyond %s, where the server's history left timeline %d for %d; "+
			"the slot on the server confirmed exactly what the sink recorded last, so the stream ran on through this server's promotion "+
			"and the changes after %s are its own; going on", tc.Checkpoint, tc.From, tc.Switchpoint, tc.From, tc.To, tc.Switchpoint)
	}
	return fmt.Sprintf("the checkpoint was written on timeline %d at %s, the server is on timeline %d, whose history left timeline %d at %s: "+
		"a standby that had every change in Kafka was promoted; going on", tc.From, tc.Checkpoint, tc.To, tc.From, tc.Switchpoint)
}
