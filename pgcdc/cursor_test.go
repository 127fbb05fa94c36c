package pgcdc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// TestCursorFormat pins the cursor's JSON: an earlier version's snapshot
// cursor is read as such, the snapshot's fields stay at the top level
// beside the identity, the confirmed position and the gaps, and a newer
// format is refused.
func TestCursorFormat(t *testing.T) {
	t.Parallel()
	old := json.RawMessage(`{"snapshot":"run1","lsn":"0/10","table":"public.a","last_key":["7"],"done_tables":["public.b"]}`)
	c, err := parseRunCursor(old)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 0 || c.Source != nil || c.Confirmed != 0 || c.snapshot == nil || c.snapshot.Snapshot != "run1" || c.snapshot.LastKey[0] != "7" {
		t.Fatalf("old cursor read as %+v, snapshot %+v", c.cursorFields, c.snapshot)
	}
	c.Source = &sourceIdentity{SystemID: "123", Timeline: 1, Database: "db", DatabaseOID: 5, Slot: "s"}
	c.Confirmed = lsnText(0x20)
	c.addGap(gapRecord{Cause: "slot_missing", Action: "accept", From: 0x10, To: 0x30, Bytes: 0x20, At: time.Unix(0, 0).UTC()})
	raw, err := c.marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cursor_version":1,"source":{"system_id":"123","timeline":1,"database":"db","database_oid":5,"slot":"s"},"confirmed_lsn":"0/20",` +
		`"gaps":[{"cause":"slot_missing","action":"accept","from":"0/10","to":"0/30","wal_bytes":32,"at":"1970-01-01T00:00:00Z"}],` +
		`"snapshot":"run1","lsn":"0/10","table":"public.a","last_key":["7"],"done_tables":["public.b"]}`
	if string(raw) != want {
		t.Fatalf("cursor JSON\n got %s\nwant %s", raw, want)
	}
	back, err := parseRunCursor(raw)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := parseCursor(raw); !ok || s.Table != "public.a" || back.snapshot == nil || back.Source.SystemID != "123" || back.Confirmed != 0x20 || len(back.Gaps) != 1 {
		t.Fatalf("round trip lost fields: %+v %+v", back.cursorFields, back.snapshot)
	}
	noSnap, _ := cursor{cursorFields: cursorFields{Confirmed: 1}}.marshal()
	if _, ok := parseCursor(noSnap); ok || strings.Contains(string(noSnap), "snapshot") {
		t.Fatalf("a cursor without a snapshot run reads as one: %s", noSnap)
	}
	if _, err := parseRunCursor(json.RawMessage(fmt.Sprintf(`{"cursor_version":%d}`, cursorVersion+1))); !errors.Is(err, kafkasink.ErrCheckpoint) {
		t.Fatalf("a newer cursor version: %v, want ErrCheckpoint", err)
	}
	for range maxGapRecords + 3 {
		c.addGap(gapRecord{})
	}
	if len(c.Gaps) != maxGapRecords {
		t.Fatalf("%d gap records kept, want %d", len(c.Gaps), maxGapRecords)
	}
}

// TestPlanSource pins the start-up decisions about the slot and the
// checkpoint.
func TestPlanSource(t *testing.T) {
	t.Parallel()
	id := sourceIdentity{SystemID: "7001", Timeline: 1, Database: "shop", DatabaseOID: 16384, Slot: "s1"}
	other := func(mod func(*sourceIdentity)) *sourceIdentity { o := id; mod(&o); return &o }
	ck := kafkasink.Checkpoint{Position: kafkasink.Position{LSN: 0x1000, Index: 2}}
	live := slotState{exists: true, confirmed: 0x1100, restart: 0x900, walStatus: "reserved", current: 0x5000}
	rec := func(src *sourceIdentity, confirmed kafkasink.LSN) cursor {
		return cursor{cursorFields: cursorFields{Version: 1, Source: src, Confirmed: lsnText(confirmed)}}
	}
	type want struct {
		refuse           string // part of the error; "" to go on
		kind             SourceEventKind
		create, drop     bool
		adopt, timeline  bool
		gapFrom, gapTo   kafkasink.LSN
		errIsSourceError bool
	}
	for _, tc := range []struct {
		name     string
		gap      SlotGap
		noCreate bool
		streamed bool
		ck       kafkasink.Checkpoint
		cur      cursor
		slot     slotState
		want     want
	}{
		{"fresh sink, no slot", 0, false, false, kafkasink.Checkpoint{}, cursor{}, slotState{current: 0x5000}, want{create: true}},
		{"fresh sink, no slot, CreateSlot off", 0, true, false, kafkasink.Checkpoint{}, cursor{}, slotState{current: 0x5000}, want{refuse: "does not exist", create: true}},
		{"same source, slot behind what was confirmed", 0, false, false, ck, rec(&id, 0x1200), live, want{}},
		{"same source, slot at what was confirmed", 0, false, false, ck, rec(&id, 0x1100), live, want{}},
		{"old checkpoint: adopted", 0, false, false, ck, cursor{}, live, want{adopt: true}},
		{"checkpoint on a timeline the server's history lacks", 0, false, false, ck, rec(other(func(s *sourceIdentity) { s.Timeline = 2 }), 0x1100), live,
			want{refuse: "does not descend from timeline 2", kind: SourceTimelineDiverged, timeline: true, gapTo: 0x1000, errIsSourceError: true}},
		{"other system", SlotGapAccept, false, false, ck, rec(other(func(s *sourceIdentity) { s.SystemID = "9" }), 0x1100), live,
			want{refuse: "system identifier 9, now 7001", kind: SourceIdentityMismatch, errIsSourceError: true}},
		{"other database", SlotGapAccept, false, false, ck, rec(other(func(s *sourceIdentity) { s.DatabaseOID = 1 }), 0x1100), live,
			want{refuse: `database "shop" (oid 1), now "shop" (oid 16384)`, kind: SourceIdentityMismatch, errIsSourceError: true}},
		{"other slot", SlotGapAccept, false, false, ck, rec(other(func(s *sourceIdentity) { s.Slot = "s0" }), 0x1100), live,
			want{refuse: `slot "s0", now "s1"`, kind: SourceIdentityMismatch, errIsSourceError: true}},
		{"slot missing: refused", 0, false, false, ck, rec(&id, 0x1100), slotState{current: 0x5000},
			want{refuse: "-slot-gap=resnapshot", kind: SourceSlotMissing, create: true, gapFrom: 0x1100, gapTo: 0x5000, errIsSourceError: true}},
		{"slot missing, old checkpoint: refused", 0, false, false, ck, cursor{}, slotState{current: 0x5000},
			want{refuse: "does not exist, but the sink's checkpoint is at 0/1000:2", kind: SourceSlotMissing, create: true, adopt: true, gapFrom: 0x1000, gapTo: 0x5000, errIsSourceError: true}},
		{"slot missing: accepted", SlotGapAccept, false, false, ck, rec(&id, 0x1100), slotState{current: 0x5000},
			want{kind: SourceSlotMissing, create: true, gapFrom: 0x1100, gapTo: 0x5000}},
		{"slot missing, accepted, CreateSlot off", SlotGapAccept, true, false, ck, rec(&id, 0x1100), slotState{current: 0x5000},
			want{refuse: "Config.CreateSlot is off", kind: SourceSlotMissing, create: true, gapFrom: 0x1100, gapTo: 0x5000}},
		{"slot lost while streaming", SlotGapAccept, false, true, ck, rec(&id, 0x1100), slotState{current: 0x5000},
			want{refuse: "no longer exists", kind: SourceSlotLost, gapFrom: 0x1100, gapTo: 0x5000}},
		{"slot invalidated: refused", 0, false, false, ck, rec(&id, 0x1100), slotState{exists: true, confirmed: 0x1100, walStatus: "lost", current: 0x5000},
			want{refuse: "wal_status = 'lost'", kind: SourceSlotInvalidated, create: true, drop: true, gapFrom: 0x1100, gapTo: 0x5000, errIsSourceError: true}},
		{"slot conflicting: resnapshot", SlotGapResnapshot, false, false, ck, rec(&id, 0x1100), slotState{exists: true, confirmed: 0x1100, conflicting: true, current: 0x5000},
			want{kind: SourceSlotInvalidated, create: true, drop: true, gapFrom: 0x1100, gapTo: 0x5000}},
		{"slot invalidated while streaming", SlotGapAccept, false, true, ck, rec(&id, 0x1100), slotState{exists: true, confirmed: 0x1100, walStatus: "lost", current: 0x5000},
			want{refuse: "while Run was streaming", kind: SourceSlotInvalidated, create: true, drop: true, gapFrom: 0x1100, gapTo: 0x5000, errIsSourceError: true}},
		{"slot advanced: refused", 0, false, false, ck, rec(&id, 0x1080), live,
			want{refuse: "confirmed_flush_lsn 0/1100, beyond the highest position this sink confirmed, 0/1080", kind: SourceSlotAdvanced, gapFrom: 0x1080, gapTo: 0x1100, errIsSourceError: true}},
		{"slot advanced: resnapshot", SlotGapResnapshot, false, false, ck, rec(&id, 0x1080), live,
			want{kind: SourceSlotAdvanced, gapFrom: 0x1080, gapTo: 0x1100}},
		{"slot advanced below the checkpoint: no resnapshot", SlotGapResnapshot, false, false, kafkasink.Checkpoint{Position: kafkasink.Position{LSN: 0x1200}}, rec(&id, 0x1080), live,
			want{refuse: "not beyond its checkpoint", kind: SourceSlotAdvanced, gapFrom: 0x1080, gapTo: 0x1100, errIsSourceError: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Slot: "s1", CreateSlot: !tc.noCreate, SlotGap: tc.gap}
			p := planSource(sourceFacts{cfg: &cfg, streamed: tc.streamed, ck: tc.ck, cur: tc.cur, id: id, slot: tc.slot})
			w := tc.want
			switch {
			case w.refuse == "" && p.refuse != nil:
				t.Fatalf("refused: %v", p.refuse)
			case w.refuse != "" && (p.refuse == nil || !strings.Contains(p.refuse.Error(), w.refuse)):
				t.Fatalf("refusal %v, want one saying %q", p.refuse, w.refuse)
			}
			var se *SourceError
			if errors.As(p.refuse, &se) != w.errIsSourceError {
				t.Errorf("refusal %T, want a *SourceError: %v", p.refuse, w.errIsSourceError)
			}
			if p.create != w.create || p.drop != w.drop || p.adopt != w.adopt || (p.timeline != nil) != w.timeline {
				t.Errorf("create %v drop %v adopt %v timeline %v, want %v %v %v %v", p.create, p.drop, p.adopt, p.timeline, w.create, w.drop, w.adopt, w.timeline)
			}
			if kind := SourceEventKind(0); p.gap != nil || w.kind != 0 {
				if p.gap != nil {
					kind = p.gap.Kind
				} else if se != nil {
					kind = se.Kind
				}
				if kind != w.kind {
					t.Errorf("event kind %v, want %v", kind, w.kind)
				}
			}
			if p.gap != nil {
				if p.gap.From != w.gapFrom || p.gap.To != w.gapTo || p.gap.Bytes != int64(w.gapTo-w.gapFrom) {
					t.Errorf("gap %s..%s (%d bytes), want %s..%s", p.gap.From, p.gap.To, p.gap.Bytes, w.gapFrom, w.gapTo)
				}
				if (p.refuse != nil) != (p.gap.Action == SlotGapRefuse && p.gap.Err != nil) {
					t.Errorf("gap action %v with error %v, refusal %v", p.gap.Action, p.gap.Err, p.refuse)
				}
			}
		})
	}
}

// TestCheckCreated refuses a new slot that begins at or before the
// checkpoint: the server is behind what the sink delivered.
func TestCheckCreated(t *testing.T) {
	t.Parallel()
	cfg := Config{Slot: "s1"}
	f := sourceFacts{cfg: &cfg, ck: kafkasink.Checkpoint{Position: kafkasink.Position{LSN: 0x1000}}}
	if err := checkCreated(f, 0x1001); err != nil {
		t.Fatal(err)
	}
	var se *SourceError
	if err := checkCreated(f, 0x1000); !errors.As(err, &se) || !strings.Contains(err.Error(), "at or before the sink's checkpoint") {
		t.Fatalf("checkCreated at the checkpoint = %v", err)
	}
}
